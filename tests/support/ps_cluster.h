// Clusters of real dtrain processes for integration tests: tasks started one by
// one with flags of their own, and readers of the lines the tasks print at the end.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/process.h"
#include "support/virtual_network.h"

namespace dtrain::testing {

inline constexpr std::string_view kSecret = "ps cluster test secret";

// "DTRAIN_SECRET=<secret>", for a child's environment.
std::string secret_env(std::string_view secret);

// The flags every process of these tests shares: a small model on one thread, quiet.
std::vector<std::string> softmax_flags();

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b);

// Everything a process printed, for failure messages and for searching.
std::string all_output(const ProcessResult& r);

// A cluster of `ps` ps tasks and `workers` workers on free loopback ports, started by hand with
// `dtrain task`, so that each task may get flags of its own, and be killed and started again on
// the same address. With no ps tasks, the workers train by all-reduce.
class HandStartedCluster {
 public:
  HandStartedCluster(int ps, int workers);
  // The same with every task on a host of its own in `network`, which must outlive the cluster:
  // the ps tasks on hosts 0..ps-1, then the workers, all on port kNetworkPort.
  HandStartedCluster(int ps, int workers, const VirtualNetwork& network);
  static constexpr uint16_t kNetworkPort = 2222;
  // The host of `network` a task runs on.
  int host_of(const std::string& job, int index) const;

  uint16_t ps_port(int index) const { return ports_[static_cast<size_t>(index)]; }
  // Workers started from now on reach ps `index` at `port` (a proxy in front of it).
  void route_workers_to_ps(int index, uint16_t port);

  // Starts one task with the given flags; the cluster flags are added here. prefix: a command
  // that runs it in another setting (DtrainProcess::Options::prefix), e.g. prlimit's limits.
  std::unique_ptr<DtrainProcess> start(const std::string& job, int index,
                                       const std::vector<std::string>& flags,
                                       std::string_view secret = kSecret,
                                       const std::vector<std::string>& prefix = {}) const;

 private:
  // The cluster flags from each task's host and port.
  void list_hosts(const std::vector<std::string>& hosts);

  int ps_ = 0;
  const VirtualNetwork* network_ = nullptr;
  std::vector<uint16_t> ports_;
  std::string ps_hosts_, worker_hosts_;
  std::string workers_ps_hosts_;  // the ps addresses workers are given
};

// The first match of `pattern` (POSIX ERE, support/text_match.h) in text, its capture groups as
// numbers; nullopt if none.
std::optional<std::vector<int64_t>> numbers_in(const std::string& text, const std::string& pattern);

// A ps task's closing line: global step, updates applied, stale gradients dropped, duplicate
// pushes, non-finite gradients rejected, connections rejected (failed the handshake) and failed
// (closed for an error after it).
struct PsSummary {
  int64_t step = -1, applied = -1, stale = -1, duplicates = -1, nonfinite = -1, rejected = -1,
          failed = -1;
};
std::optional<PsSummary> ps_summary(const std::string& out, int ps = 0);

// The test accuracy a worker reports at its end; -1 if it did not.
double test_accuracy(int worker, const std::string& out);

// Waits for a worker's first step line at global step `step` or past it (a worker's lines may skip
// steps: another worker's pushes, a stale gradient); returns it, or "" as wait_for_line does.
std::string wait_for_global_step(DtrainProcess& worker, int64_t step);

// The local steps a ps worker reports at its end; -1 if it did not.
int64_t local_steps_of(int worker, const std::string& out);

// Where the reliability tests strike: a step in [first, last] drawn for the call site `what` from
// the seed $DTRAIN_FAULT_SEED (a fixed default, so that runs repeat). Each draw is printed with
// the seed, so that a failure can be replayed; naming the site keeps one test's draws from
// shifting when another is added.
int64_t fault_step(std::string_view what, int64_t first, int64_t last);

// The child of `parent` (a local launcher) whose command line holds `arguments` in a row
// ("--job_name", "ps"), from /proc; -1 if none.
pid_t child_with_arguments(pid_t parent, const std::vector<std::string>& arguments);

// Waits until worker `index` of the local launcher `launcher` prints a step line holding `marker`
// ("global_step=40,"), then sends `signal` to that worker's process. Returns its pid, or -1 when
// no such line came (the launcher's output ended) or no such worker was found.
pid_t signal_worker_at(DtrainProcess& launcher, int index, std::string_view marker, int signal);

// `flags` with the value of `flag` replaced (it must be there).
std::vector<std::string> with_flag(std::vector<std::string> flags, const std::string& flag,
                                   const std::string& value);

}  // namespace dtrain::testing
