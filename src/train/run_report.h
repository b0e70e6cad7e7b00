// What a run prints when it ends (DESIGN.md §2a: the report in one place): the test accuracy, the
// training time and throughput, the peak memory and the strategy's own summary; or, stopped by a
// signal, what was kept and what a restart resumes from. The loop decides; this only says it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "train/strategy.h"
#include "train/train_config.h"

namespace dtrain {

// The facts a closing report states, as the loop leaves them.
struct RunEnd {
  WorkerPlace place;
  const TrainResult* result = nullptr;  // REQUIRES: non-null
  int64_t first_step = 0;               // the global step the run started (or resumed) at
  int64_t local_steps = 0;              // steps this process ran
  int batch_size = 0;                   // per worker
  std::optional<double> target_accuracy;
  // Why the test accuracy may be low although the loss is not (Layer::statistics_warning): said
  // by the chief, after its figures, on every way a run is started (the CLI, Python's fit).
  std::vector<std::string> warnings;
};

// The closing lines of a run that reached its end: accuracy, time, memory, the strategy's summary
// and, for the chief, a target it did not reach and each of end.warnings ("warning: ...").
void print_closing_lines(std::ostream& out, const Strategy& strategy, const RunEnd& end);

// The line of a run a signal stopped: where, and what a restart resumes from (the checkpoint in
// train_dir, when there is one; nothing, for a chief without one). left_job: the worker left an
// elastic job that goes on without it.
void print_stopped_line(std::ostream& out, const RunEnd& end, bool left_job,
                        const std::optional<std::filesystem::path>& checkpoint_dir);

// "worker=1: " for a worker of a cluster, nothing for a local run.
std::string line_prefix(const WorkerPlace& place);

}  // namespace dtrain
