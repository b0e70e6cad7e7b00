// Splitting a task's output into lines and bars. A bar that arrives in pieces waits in pending
// like a partial line; a carriage return that no "\x1b[K" follows before the newline is not a bar
// and is dropped.
#include "cluster/output_relay.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

namespace dtrain {
namespace {

constexpr std::string_view kEraseLine = "\x1b[K";
// A bar longer than this is no bar of ours: its carriage return is dropped rather than waited on.
constexpr size_t kMaxBar = 1024;

}  // namespace

void OutputRelay::relay(std::string_view name, bool prefix, std::string_view data,
                        std::string& pending) {
  pending.append(data);
  // pending holds the current line's text, bars already taken out, then the data not yet read:
  // reading it again from the start is safe.
  std::string line;
  for (size_t i = 0; i < pending.size();) {
    const char c = pending[i];
    if (c == '\n') {
      this->line(prefix ? fmt::format("[{}] {}", name, line) : line);
      line.clear();
      ++i;
    } else if (c != '\r') {
      line.push_back(c);
      ++i;
    } else if (const size_t end = pending.find(kEraseLine, i), newline = pending.find('\n', i);
               end != std::string::npos && end < newline) {
      const std::string bar = pending.substr(i + 1, end - i - 1);
      show_bar(bar.empty() || !prefix ? bar : fmt::format("[{}] {}", name, bar));
      i = end + kEraseLine.size();
    } else if (newline == std::string::npos && pending.size() - i < kMaxBar) {
      pending = line + pending.substr(i);  // a bar whose end is still to come
      out_ << std::flush;
      return;
    } else {
      ++i;  // a bare carriage return
    }
  }
  pending = std::move(line);
  out_ << std::flush;
}

void OutputRelay::flush(std::string_view name, bool prefix, std::string& pending) {
  if (!pending.empty()) relay(name, prefix, "\n", pending);
  pending.clear();
}

void OutputRelay::line(std::string_view text) {
  const std::string bar = bar_;
  erase_bar();
  fmt::print(out_, "{}\n", text);
  show_bar(bar);
}

void OutputRelay::show_bar(std::string text) {
  if (!terminal_) return;
  if (text.empty()) {
    erase_bar();
    return;
  }
  out_ << '\r' << text << kEraseLine;
  bar_ = std::move(text);
}

void OutputRelay::erase_bar() {
  if (bar_.empty()) return;
  out_ << '\r' << kEraseLine;
  bar_.clear();
}

}  // namespace dtrain
