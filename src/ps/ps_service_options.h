// What a ps task is given: its place in the job, the model's layout, the optimizer, sync mode,
// its server, and how it treats workers that are lost or a stop (ps/ps_service.h).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/stop_request.h"
#include "comm/server.h"
#include "comm/transport.h"
#include "nn/param_set.h"
#include "ps/partition.h"
#include "ps/ps_protocol.h"
#include "ps/shard_store.h"

namespace dtrain {

// What a sync ps does when a worker it needs is gone for longer than worker_timeout_ms.
enum class WorkerLossPolicy {
  kStop,      // fail every waiting worker and exit, naming the lost one (the default)
  kContinue,  // lower R to the workers left, say so, and go on
};

struct PsServiceOptions;

// A checkpoint's values, optimizer slots (one ParamSet per slot, in the store's order) and step:
// what a restarted ps starts from.
struct PsRestoredState {
  ParamSet params;
  std::vector<ParamSet> slots;
  int64_t step = 0;
};

// A ps task that does not know what its job trains until the chief says it (a TensorFlow ps
// started with only the cluster flags): given the chief's settings (ps/job_settings.h), fills
// in `into`'s specs, map, optimizer, sync, planned_workers, min_workers and settings, and returns
// what the task restores for them (its --train_dir's newest checkpoint), if anything. Throws
// Error naming the setting the task cannot take; it then waits for the chief to say others.
using LearnSettings = std::function<std::optional<PsRestoredState>(const nlohmann::json& chief,
                                                                   PsServiceOptions& into)>;

struct PsServiceOptions {
  int ps = 0;  // this task's index in the ps job
  // What the job trains, as every worker says it before its hello (ps/job_settings.h): a worker
  // whose settings differ is refused, naming the first that does. Empty: not checked. Where
  // `learn` is set, these and everything up to server are learnt from the chief.
  std::string settings;
  LearnSettings learn;
  // Called once the task knows what it serves (at once, or when it has learnt it), from the
  // thread that made it so; may be empty.
  std::function<void(const PsServiceOptions&)> on_configured;
  std::vector<ParamSpec> specs;
  PartitionMap map;
  OptimizerConfig optimizer;
  SyncOptions sync;
  ServerOptions server;  // bind address, port, secret, limits
  // Sync: how long a worker's push waits for the other R-1 gradients of its step before the ps
  // answers with an error naming the step (a silent hang is never the answer).
  int sync_wait_ms = 600'000;
  // Sync: a reply that has waited this long for its step's gradients names the workers not yet
  // in, again at doubling intervals (--stall_warning; 0: never).
  int stall_warning_ms = 0;
  // A worker whose connection closed before it reported done is lost; after this long without it
  // coming back, the ps stops waiting for it (and, in sync mode with too few workers left for a
  // step, applies on_worker_loss).
  int worker_timeout_ms = 60'000;
  WorkerLossPolicy on_worker_loss = WorkerLossPolicy::kStop;
  // Sync, an elastic job (--min_workers; 0: not elastic): a worker whose last connection closes
  // before it is done leaves the job at once, and a step takes the gradients of the workers left
  // (R at most); one that comes back joins it again. Fewer than this many left fail the job,
  // naming who left. worker_timeout_ms and on_worker_loss then only bound the wait at the end.
  int min_workers = 0;
  // Async, a job that takes joining workers (--max_workers above --workers): the job's own
  // workers are 0..planned_workers-1, each waited for as usual; identities from there up to
  // sync.total_num_replicas (--max_workers) are handed to workers that join the running job
  // (kClaimWorker, ps0 only), which the ps counts as they come and go. 0: sync.total_num_replicas.
  int planned_workers = 0;
  // The ps tasks' addresses (host:port,host:port), which ps0 tells a joining worker.
  std::string ps_hosts;
  // Set by a signal: the task stops — it tells its workers in every reply, and run() returns once
  // none is connected any more, or shutdown_timeout_ms after the request at the latest.
  const StopRequest* stop = nullptr;
  int shutdown_timeout_ms = 20'000;
  // While a worker is not connected (not yet, or lost), run() says so this often: which, from
  // where it was last connected, and the time left for a lost one.
  int wait_report_interval_ms = 10'000;
  // How payloads move between this task and a worker (comm/transport.h), agreed in each
  // connection's link step: kAuto by reference where the worker wants it and the proofs hold, over
  // TCP otherwise; kTcp always over TCP; kShm refuses a worker with which memory does not work,
  // naming the flag. Overrides server.connection.transport.
  Transport transport = Transport::kAuto;
};

}  // namespace dtrain
