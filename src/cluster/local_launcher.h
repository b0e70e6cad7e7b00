// The embedded default of `dtrain train --ps P --workers W`: the whole cluster as child processes
// of this one, on loopback. Children's output is prefixed with their task name ([ps0],
// [worker1]), Ctrl-C, SIGTERM and SIGHUP are passed on (as SIGTERM, which each task answers by
// stopping at its next step), every child is reaped, and the launcher fails if any task failed.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace dtrain {

struct LocalTask {
  std::string name;               // the output prefix, e.g. "worker1"
  std::vector<std::string> args;  // arguments after the binary
  bool prefix_output = true;      // false: lines are relayed as they are (a report, a table)
  // A listening socket the task's first start inherits (comm/handed_listeners.h), or -1.
  // run_local_cluster closes it once that start is done: a restarted task binds its port itself.
  int listen_fd = -1;
};

// What the launcher starts again when a task crashes (dies of a signal it did not send: SIGKILL,
// SIGSEGV, the kernel's OOM killer). A task that exits with a code of its own made a decision and
// said why; running it again would only repeat it, so that is a failure as before.
enum class RestartPolicy {
  kTask,   // the crashed task alone: the ps strategies, whose tasks reconnect and carry on
  kGroup,  // every task, once all have stopped: all-reduce, where one lost rank fails the ring
  // The crashed task alone, which joins the job again; once restarts run out, the others go on
  // without it: an elastic job (--min_workers), whose workers fail it themselves when too few
  // remain. A task that exits with 128 + SIGTERM left the job: neither a failure nor restarted.
  kElastic,
};

struct LaunchOptions {
  std::filesystem::path binary;  // the program each task runs (this dtrain binary)
  // "NAME=value" entries in every child's environment, replacing the launcher's own of that name.
  std::vector<std::string> extra_env;
  std::chrono::milliseconds grace{10000};  // after a stop, how long children get before SIGKILL
  int max_restarts = 0;  // crashes survived over the whole launch (tasks or groups restarted)
  RestartPolicy restart = RestartPolicy::kTask;
  // out is a terminal: a task's progress bar stays on its last line (cluster/output_relay.h);
  // otherwise bars are dropped and only lines relayed.
  bool terminal = false;
};

struct LaunchResult {
  int exit_code = 0;                // 0 if every task exited 0; else the first failure's code
  std::vector<std::string> failed;  // one line per failed task: "worker1 exited with code 1"
  bool interrupted = false;         // the launcher received SIGINT, SIGTERM or SIGHUP
  int restarts = 0;                 // crashes survived by restarting
};

// Starts every task, relays their output line by line to out with a "[name] " prefix (and a
// task's progress bar, on a terminal), and returns once all have exited. A crashed task is
// restarted (options.restart says what else) while options.max_restarts allows, with a
// "[launcher]" line saying so. If a task fails or the launcher is interrupted, the others get
// SIGTERM, then SIGKILL after options.grace. Children die with the launcher even if it is killed
// (the kernel's parent-death signal). Installs SIGINT/SIGTERM/SIGHUP handlers for its duration.
// Thread-safety: one call at a time per process.
LaunchResult run_local_cluster(const std::vector<LocalTask>& tasks, const LaunchOptions& options,
                               std::ostream& out);

}  // namespace dtrain
