// The membership fixture of the elastic tests of every strategy (tests/train/elastic_*_test.cc):
// an elastic job under the local launcher, the flags its workers share, the step at which a test
// strikes one of them, and what a launcher's ranks or a worker started by hand are given.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "support/process.h"
#include "support/temp_dir.h"

namespace dtrain::testing {

// The training flags every worker of these jobs shares: a step line every 20 steps; steps held to
// 2 ms or more (--step_delay_ms), so that a test's signal, and a restarted worker's joining, come
// in the middle of the run.
std::vector<std::string> elastic_training(int steps);

// An elastic job of `workers` that goes on while `min_workers` remain, the local launcher
// restarting a lost worker up to `max_restarts` times.
struct ElasticJob {
  std::string strategy;  // "allreduce" (the coordinator's views) or "sync" (the ps's count)
  int workers = 3;
  int min_workers = 2;
  int max_restarts = 0;
  int steps = 600;

  // `dtrain train`'s arguments for it.
  std::vector<std::string> launcher_flags() const;
  // What a worker's step line says at `step`: all-reduce workers count the job's steps
  // ("global_step=40,"), a sync worker its own ("local_step=40,"), which a loss does not skip.
  std::string step_marker(int64_t step) const;
  // Waits until worker `index` of `launcher` has logged step `step` (a multiple of 20), then sends
  // it `signal`. Its pid, or -1 when no such line came or no such worker was found.
  pid_t signal_worker_at(DtrainProcess& launcher, int index, int64_t step, int signal) const;
};

// The cluster secret written to `dir`/secret, readable by its owner only (as --secret_file
// demands); returns the file's path.
std::string write_secret_file(const TempDir& dir, std::string_view secret);

// What a launcher that gives ranks (torchrun) gives rank `rank` of `world`: its rank, the world's
// size, the master's address and the cluster secret.
std::vector<std::string> launcher_rank_env(int rank, int world, const std::string& master,
                                           uint16_t port, std::string_view secret);

}  // namespace dtrain::testing
