// The run log as TensorBoard event files: a new events.out.tfevents.* file in a folder for each
// run (or resumption), written by the sink's own thread so that encoding histograms and writing
// never stall a training step. `tensorboard --logdir DIR` shows it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "metrics/run_log.h"

namespace dtrain {

class TensorBoardSink final : public RunLogSink {
 public:
  // Creates dir if need be and a new event file in it (kPrivateFileMode, base/private_file.h),
  // whose first record names the format. Throws UsageError naming the file when its name is
  // taken (a link or file someone planted), IoError naming the folder or file on other failures.
  // Written events reach the file within flush_ms, and all of them by close().
  explicit TensorBoardSink(const std::filesystem::path& dir, int flush_ms = 2000);
  // Closes if close() was not called; an error then is lost.
  ~TensorBoardSink() override;
  TensorBoardSink(const TensorBoardSink&) = delete;
  TensorBoardSink& operator=(const TensorBoardSink&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Queues the record's events and returns; scalars are encoded at once, histograms on the
  // writer thread. When the writer is two histogram records behind (a slow disk), a third is
  // dropped rather than queued, and counted in the scalar tensorboard/dropped_histograms at close.
  void write(const RunRecord& record) override;
  void close() override;

 private:
  using Job = std::function<std::string()>;  // returns one serialized Event
  // The record's scalars but those of a tag already written at its step (an evaluation repeats
  // the loss of the step line before it): one point per tag and step.
  std::vector<std::pair<std::string, double>> new_scalars(const RunRecord& record);
  void enqueue(Job job, bool histograms);
  void run(std::stop_token stop);
  void write_event(const std::string& event);
  void flush_file();
  // Keeps the first failure (errno's) for throw_if_failed(); nothing is written after it.
  void note_write_error();
  void throw_if_failed();

  std::filesystem::path path_;
  const int flush_ms_;
  std::FILE* file_ = nullptr;
  std::map<std::string, int64_t> last_step_of_;  // tag → step; write()'s thread only

  std::mutex mutex_;  // guards the members below
  std::condition_variable_any wake_;
  std::deque<std::pair<Job, bool>> queue_;  // the job, and whether it is a histogram record
  int pending_histograms_ = 0;
  int64_t dropped_histograms_ = 0;
  int64_t last_step_ = 0;
  std::string error_;  // the first write that failed; nothing is written after it
  bool closed_ = false;

  std::jthread writer_;  // last: it stops and joins before the members it uses go
};

}  // namespace dtrain
