// The closing lines: their wording is what users, the launchers' relays and the tests read, so it
// lives in one place.
#include "train/run_report.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <string>

#include "base/resident_memory.h"
#include "base/stop_request.h"

namespace dtrain {

std::string line_prefix(const WorkerPlace& place) {
  return place.distributed ? fmt::format("worker={}: ", place.name_index()) : std::string();
}

void print_closing_lines(std::ostream& out, const Strategy& strategy, const RunEnd& end) {
  const TrainResult& result = *end.result;
  const WorkerPlace& place = end.place;
  const Closing closing = strategy.closing(RunFigures{.first_step = end.first_step,
                                                      .last_step = result.global_step,
                                                      .local_steps = end.local_steps,
                                                      .train_seconds = result.train_seconds,
                                                      .batch_size = end.batch_size,
                                                      .test_accuracy = result.test_accuracy});
  if (place.distributed) {
    const std::string& counters = closing.counters;
    fmt::print(out, "worker={}: test accuracy = {:.4f}\n", place.name_index(),
               result.test_accuracy);
    fmt::print(out,
               "worker={}: training elapsed time: {:.3f} s ({} local steps, {:.1f} "
               "examples/sec{})\n",
               place.name_index(), result.train_seconds, end.local_steps,
               result.examples_per_second, counters.empty() ? "" : "; " + counters);
    fmt::print(out, "worker={}: peak resident memory {}\n", place.name_index(),
               format_peak_resident());
  } else {
    fmt::print(out, "test accuracy = {:.4f}\n", result.test_accuracy);
    fmt::print(out, "Training elapsed time: {:.3f} s ({} steps, {:.1f} examples/sec)\n",
               result.train_seconds, end.local_steps, result.examples_per_second);
    fmt::print(out, "Peak resident memory: {}\n", format_peak_resident());
  }
  for (const std::string& line : closing.lines) fmt::print(out, "{}\n", line);
  // The chief judges the target; a ps worker may end its steps before it hears the verdict.
  if (place.chief && end.target_accuracy && !result.seconds_to_target)
    fmt::print(out, "{}target accuracy {} not reached\n", line_prefix(place), *end.target_accuracy);
  if (place.chief) {
    for (const std::string& warning : end.warnings)
      fmt::print(out, "{}warning: {}\n", line_prefix(place), warning);
  }
  out << std::flush;
}

void print_stopped_line(std::ostream& out, const RunEnd& end, bool left_job,
                        const std::optional<std::filesystem::path>& checkpoint_dir) {
  const TrainResult& result = *end.result;
  const std::string prefix = line_prefix(end.place);
  if (left_job) {
    fmt::print(out, "{}left the job at global step {} after {} steps ({}); the others go on\n",
               prefix, result.global_step, end.local_steps, signal_name(result.halt_signal));
    out << std::flush;
    return;
  }
  std::string kept;
  if (checkpoint_dir) {
    kept = fmt::format(
        "; checkpoint of step {} written to {}: a restart with the same --train_dir resumes from "
        "it",
        result.global_step, checkpoint_dir->string());
  } else if (end.place.chief) {
    kept = "; nothing was saved (no --train_dir): a restart starts over";
  }
  fmt::print(out, "{}stopped by {} at global step {} after {} steps{}\n", prefix,
             signal_name(result.halt_signal), result.global_step, end.local_steps, kept);
  out << std::flush;
}

}  // namespace dtrain
