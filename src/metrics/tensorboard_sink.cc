// The writer thread takes the queue whole, encodes and writes each event outside the lock, and
// flushes when flush_ms has passed since the last flush; close() asks it to stop, and it drains
// the queue before it returns.
#include "metrics/tensorboard_sink.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "base/private_file.h"
#include "metrics/tensorboard_events.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kMaxPendingHistograms = 2;

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// Two sinks of one process that open in the same second (a worker's and the chief's) get
// different names.
std::filesystem::path new_event_file(const std::filesystem::path& dir) {
  static std::atomic<int64_t> files_opened{0};
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  return dir / tensorboard::event_file_name(seconds, host_name(), ::getpid(), files_opened++);
}

}  // namespace

TensorBoardSink::TensorBoardSink(const std::filesystem::path& dir, int flush_ms)
    : flush_ms_(flush_ms) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw IoError(fmt::format("{}: cannot create the log folder: {}", dir.string(), ec.message()));
  path_ = new_event_file(dir);
  // Exclusive: the name is predictable (time, host, pid), so anyone who can write to the folder
  // could have put a link there to a file of ours.
  const int fd = create_private_file(path_);
  file_ = ::fdopen(fd, "wb");
  if (file_ == nullptr) {
    const int error = errno;
    ::close(fd);
    throw IoError(
        fmt::format("{}: cannot create the event file: {}", path_.string(), std::strerror(error)));
  }
  write_event(tensorboard::file_version_event(wall_time_now()));
  flush_file();
  throw_if_failed();
  writer_ = std::jthread([this](std::stop_token stop) { run(stop); });
}

TensorBoardSink::~TensorBoardSink() {
  try {
    close();
  } catch (const Error&) {
    // Reported by close() to a caller that asked; a destructor has no one to tell.
  }
}

void TensorBoardSink::write(const RunRecord& record) {
  const double now = wall_time_now();
  const int64_t step = record.step;
  {
    std::lock_guard lock(mutex_);
    last_step_ = step;
  }
  if (record.resumed)
    enqueue([now, step] { return tensorboard::session_start_event(now, step); }, false);
  if (!record.texts.empty()) {
    enqueue(
        [now, step, texts = record.texts] { return tensorboard::texts_event(now, step, texts); },
        false);
  }
  if (auto scalars = new_scalars(record); !scalars.empty()) {
    std::string event = tensorboard::scalars_event(now, step, scalars);
    enqueue([event = std::move(event)] { return event; }, false);
  }
  if (record.histograms && !record.histograms->empty()) {
    enqueue(
        [now, step, tensors = record.histograms] {
          return tensorboard::histograms_event(now, step, *tensors);
        },
        true);
  }
  throw_if_failed();
}

std::vector<std::pair<std::string, double>> TensorBoardSink::new_scalars(const RunRecord& record) {
  std::vector<std::pair<std::string, double>> scalars;
  for (const auto& [tag, value] : record.scalars) {
    auto [last, first_time] = last_step_of_.try_emplace(tag, record.step);
    if (!first_time && last->second == record.step) continue;
    last->second = record.step;
    scalars.emplace_back(tag, value);
  }
  return scalars;
}

void TensorBoardSink::enqueue(Job job, bool histograms) {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    if (histograms) {
      if (pending_histograms_ >= kMaxPendingHistograms) {
        ++dropped_histograms_;
        return;
      }
      ++pending_histograms_;
    }
    queue_.emplace_back(std::move(job), histograms);
  }
  wake_.notify_one();
}

void TensorBoardSink::run(std::stop_token stop) {
  auto last_flush = Clock::now();
  const auto flush_every = std::chrono::milliseconds(flush_ms_);
  for (;;) {
    std::deque<std::pair<Job, bool>> jobs;
    {
      std::unique_lock lock(mutex_);
      wake_.wait_until(lock, stop, last_flush + flush_every, [this] { return !queue_.empty(); });
      jobs.swap(queue_);
    }
    for (auto& [job, histograms] : jobs) {
      write_event(job());
      if (histograms) {
        std::lock_guard lock(mutex_);
        --pending_histograms_;
      }
    }
    if (stop.stop_requested()) {
      std::lock_guard lock(mutex_);
      if (queue_.empty()) return;  // close() flushes
      continue;
    }
    if (Clock::now() - last_flush >= flush_every) {
      flush_file();
      last_flush = Clock::now();
    }
  }
}

void TensorBoardSink::write_event(const std::string& event) {
  {
    std::lock_guard lock(mutex_);
    if (!error_.empty()) return;
  }
  const std::string record = tensorboard::framed_record(event);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) note_write_error();
}

void TensorBoardSink::note_write_error() {
  const int error = errno;
  std::lock_guard lock(mutex_);
  if (error_.empty()) {
    error_ =
        fmt::format("{}: cannot write the event file: {}", path_.string(), std::strerror(error));
  }
}

void TensorBoardSink::flush_file() {
  if (std::fflush(file_) != 0) note_write_error();
}

void TensorBoardSink::throw_if_failed() {
  std::lock_guard lock(mutex_);
  if (!error_.empty()) throw IoError(error_);
}

void TensorBoardSink::close() {
  if (file_ == nullptr) return;
  writer_.request_stop();
  if (writer_.joinable()) writer_.join();
  int64_t dropped = 0;
  int64_t step = 0;
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    dropped = dropped_histograms_;
    step = last_step_;
  }
  if (dropped > 0) {
    write_event(tensorboard::scalars_event(
        wall_time_now(), step, {{"tensorboard/dropped_histograms", static_cast<double>(dropped)}}));
  }
  flush_file();
  if (std::fclose(file_) != 0) note_write_error();
  file_ = nullptr;
  throw_if_failed();
}

}  // namespace dtrain
