#include "train/ps_worker_setup.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "base/log.h"
#include "base/stop_request.h"
#include "train/ps_job_settings.h"

namespace dtrain {

PsClientOptions ps_client_options(const TrainConfig& train, const PsClusterConfig& config,
                                  const TrainingState& state, int rank, bool chief,
                                  const std::string& name, std::ostream& out) {
  PsClientOptions options;
  options.ps = config.cluster.cluster.tasks("ps");
  options.secret = config.secret;
  options.connection.connect_timeout_ms = config.peer_timeout_ms;
  options.connection.liveness_timeout_ms = config.liveness_timeout_ms;
  options.connection.authenticate_frames = config.cluster.authenticate_frames;
  options.connection.tcp_congestion = config.cluster.tcp_congestion;
  options.connection.wait_report_interval_ms = config.wait_report_interval_ms;
  options.connection.stop = train.stop;
  options.worker = rank;
  // Said to every ps before the hello: a ps started with only the cluster flags takes the chief's.
  options.settings = ps_job_settings(state.model().name(), state.model().param_specs(),
                                     train.precision, train.optimizer, config)
                         .dump();
  // The chief keeps the newest values it was sent: with them it re-seeds a ps that comes back
  // without a checkpoint to restore, so that a killed ps does not end a run under default flags.
  if (chief) options.reseed_from = &state.params();
  options.transport = config.transport;
  options.report = [name, &out](const std::string& line) {
    fmt::print(out, "{}: {}\n", name, line);
    out << std::flush;
  };
  options.stall_warning_ms = config.stall_warning_ms;
  // The log, not out: the lines come from the client's watchdog thread, while this one waits.
  options.stall_report = [name](const std::string& line) { spdlog::warn("{}: {}", name, line); };
  if (config.sync.sync_replicas) {
    options.stall_why =
        "a sync step is answered once it has its workers' gradients: the ps tasks name those "
        "not yet in";
  }
  return options;
}

std::string payload_paths(const PsClient& client, size_t ps_tasks) {
  std::string paths;
  bool memory = false;
  for (size_t p = 0; p < ps_tasks; ++p) {
    memory = memory || client.link_traits(static_cast<int>(p)).in_memory;
    paths +=
        fmt::format("{}ps{}: {}", p == 0 ? "" : "; ", p, client.describe_link(static_cast<int>(p)));
  }
  if (memory) {
    paths +=
        " (shm: the ps copies the gradients out of this worker's memory and the values "
        "into it)";
  }
  return paths;
}

void wait_for_chief(PsClient& client, const TrainConfig& train, const PsClusterConfig& config,
                    const std::string& name, std::ostream& out) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const int slice_ms = std::min(5000, config.wait_report_interval_ms);  // how often it says so
  while (!client.wait_ready(slice_ms)) {
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (train.stop != nullptr && train.stop->requested()) {
      throw StopRequested(fmt::format("stopped by {} while waiting for the chief to initialise "
                                      "the ps tasks",
                                      signal_name(train.stop->signal())),
                          train.stop->signal());
    }
    if (waited * 1000 >= config.peer_timeout_ms) {
      throw Error(fmt::format("{}: the chief did not initialise the ps tasks within {} s", name,
                              config.peer_timeout_ms / 1000));
    }
    fmt::print(out,
               "{}: waiting for the chief to initialise the ps tasks ({:.0f} s; {:.0f} s left)\n",
               name, waited, config.peer_timeout_ms / 1000.0 - waited);
    out << std::flush;
  }
}

}  // namespace dtrain
