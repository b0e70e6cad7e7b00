// The local launcher's view of its children's output: their lines, prefixed with the task's name
// ("[worker1] ..."), and the progress bar one of them draws. A bar is "\r<text>\x1b[K" with no
// newline (metrics/progress_bar.h); on a terminal the relay keeps it on the last line, below the
// lines of every task, and elsewhere drops it, so that a log gets lines only.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

namespace dtrain {

// Not thread-safe: the launcher's one loop relays every task.
class OutputRelay {
 public:
  // terminal: out is a terminal, where a bar may be drawn and erased.
  OutputRelay(std::ostream& out, bool terminal) : out_(out), terminal_(terminal) {}
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;

  // One task's output, as it came: whole lines go out with the prefix "[name] " (or as they are
  // when prefix is false), a bar becomes the bar shown, and a partial line waits in `pending`
  // (the task's own buffer, empty at first) for the rest.
  void relay(std::string_view name, bool prefix, std::string_view data, std::string& pending);
  // The task's output ended: what waits in pending goes out as a line.
  void flush(std::string_view name, bool prefix, std::string& pending);
  // A line of the launcher's own.
  void line(std::string_view text);

 private:
  void show_bar(std::string text);
  void erase_bar();

  std::ostream& out_;
  bool terminal_;
  std::string bar_;  // the bar on the last line of the terminal, "" if none
};

}  // namespace dtrain
