// A parameter-server task on the wire: a ShardStore behind an authenticated comm::Server, one
// thread per worker connection, speaking ps/ps_protocol.h. Unlike TensorFlow's server.join(), it
// knows when training is over: run() returns once every training worker has reported done. In
// sync mode each connection also has a replier thread, which sends the replies that wait for a
// step while the connection's own thread goes on reading the worker's pushes: a ps that stopped
// reading would leave the worker's data unacknowledged, and the worker would take it for dead.
// A connection whose payloads go through memory has one in async mode too: it copies the values
// into the worker and replies while the connection's thread copies and applies the next shard.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

#include "base/stop_request.h"
#include "comm/meta_codec.h"
#include "comm/peer_memory.h"
#include "comm/server.h"
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

struct PsServiceOptions {
  int ps = 0;  // this task's index in the ps job
  std::vector<ParamSpec> specs;
  PartitionMap map;
  OptimizerConfig optimizer;
  SyncOptions sync;
  ServerOptions server;  // bind address, port, secret, limits
  // Sync: how long a worker's push waits for the other R-1 gradients of its step before the ps
  // answers with an error naming the step (a silent hang is never the answer).
  int sync_wait_ms = 600'000;
  // A worker whose connection closed before it reported done is lost; after this long without it
  // coming back, the ps stops waiting for it (and, in sync mode with too few workers left for a
  // step, applies on_worker_loss).
  int worker_timeout_ms = 60'000;
  WorkerLossPolicy on_worker_loss = WorkerLossPolicy::kStop;
  // Set by a signal: the task stops — it tells its workers in every reply, and run() returns once
  // none is connected any more, or shutdown_timeout_ms after the request at the latest.
  const StopRequest* stop = nullptr;
  int shutdown_timeout_ms = 20'000;
  // While a worker is not connected (not yet, or lost), run() says so this often: which, from
  // where it was last connected, and the time left for a lost one.
  int wait_report_interval_ms = 10'000;
  // How payloads move between this task and a worker of its host (ps_protocol.h): kAuto through
  // the worker's memory where it asks for that and the proof holds, over TCP otherwise; kTcp
  // always over TCP; kShm refuses a worker with which memory does not work, naming the flag.
  Transport transport = Transport::kAuto;
};

// A checkpoint's values, optimizer slots (one ParamSet per slot, in the store's order) and step:
// what a restarted ps starts from.
struct PsRestoredState {
  ParamSet params;
  std::vector<ParamSet> slots;
  int64_t step = 0;
};

class PsService {
 public:
  // Allocates the store, initialises it from `restored` when given, and starts listening: a
  // reconnecting worker never finds the shards uninitialised in between. Throws UsageError /
  // TransportError. REQUIRES: restored, if given, has the model's layout.
  explicit PsService(PsServiceOptions options, const PsRestoredState* restored = nullptr);
  ~PsService();
  PsService(const PsService&) = delete;
  PsService& operator=(const PsService&) = delete;

  uint16_t port() const { return server_->port(); }
  const ShardStore& store() const { return *store_; }
  const ServerStats stats() const { return server_->stats(); }
  // Waits until `done(stats())` holds or `timeout` passes; returns whether it held.
  bool wait_for(const std::function<bool(const ServerStats&)>& done,
                std::chrono::milliseconds timeout) const {
    return server_->wait_for(done, timeout);
  }

  // Initialises the shards this task holds from whole-model values and optimizer slots (one
  // ParamSet per slot, in the store's order), as the chief's kInit would: a restore from a
  // checkpoint. REQUIRES: before any worker connects; the sets have the model's layout.
  void initialize_from(const ParamSet& params, const std::vector<ParamSet>& slots, int64_t step);

  // Blocks until every training worker (0..total_num_replicas-1) has reported done, been given
  // up as lost, or was lost and training has finished — or, once a stop is requested, until no
  // worker is connected; then stops the server. Throws Error naming the lost worker when the sync
  // policy is kStop and a step can no longer complete.
  void run();
  // Prints what this task did: steps, applied updates, stale and duplicate pushes, connections.
  void print_summary(std::ostream& out) const;

 private:
  struct Scratch;  // a connection's buffers, sized once
  class Replier;   // a connection's replies that wait for a step, or go through memory
  struct DeferredReply;

  void serve(Connection& connection);
  void handle(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  void hello(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  // The worker's answer to the hello's challenge: where it holds it. Reads it back there.
  void memory_offer(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  // Gives the connection its replier thread, unless it has one.
  void start_replier(Connection& connection, Scratch& scratch);
  // "--transport shm: ps0 and worker1 cannot move payloads through memory: <why>; ...".
  std::string shm_failure(std::string_view worker, std::string_view why) const;
  // Throws Error unless the connection's worker has proved its memory reachable.
  void require_memory(const Connection& connection, const Scratch& scratch, const char* what) const;
  void init(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  void wait_ready(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  void pull(Connection& connection, bool with_slots, Scratch& scratch);
  // kPullRef: each shard's values written straight into the worker's arena.
  void pull_by_reference(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  // The reply of a shard at `step`, with whether training is over and the task is halting.
  ps_protocol::ShardReply shard_reply(uint32_t shard, int64_t step, uint8_t outcome = 0) const;
  // kPush and kPushRef: the gradient received, or copied out of the worker's memory, then
  // applied and answered by apply_push.
  void push(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  void push_by_reference(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  // Throws Error for a push this task must refuse (a shard held elsewhere, another worker's).
  void check_push(const Connection& connection, const ps_protocol::PushMeta& m,
                  const Scratch& scratch) const;
  void apply_push(Connection& connection, uint64_t request_id, const ps_protocol::PushMeta& m,
                  const ps_protocol::MemoryRef& values, Scratch& scratch);
  // The reply to a push once its step allows: the shard's values (if asked) and step, or an error
  // saying why the step will not come. Blocks up to the reply's deadline; stop ends the wait.
  void send_push_reply(Connection& connection, const DeferredReply& reply, std::span<float> buffer,
                       MetaWriter& meta, const std::stop_token& stop);
  void worker_done(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  // kWorkerFailed: the worker ends with an error; it is given up at once.
  void worker_failed(Connection& connection, const Connection::Incoming& in);
  // The counters summed over this task's shards, as a reply of this type.
  void send_counters(Connection& connection, uint16_t type, uint64_t request_id, Scratch& scratch);
  // The shard named by a request, checked to be held here; throws Error otherwise.
  size_t held_shard(uint32_t shard) const;
  // A worker's pushes and done report count only on the connection that said hello as it, which
  // its handshake proved to be that worker (worker_identity); throws Error otherwise.
  void check_own_worker(const Connection& connection, int worker, const Scratch& scratch,
                        const char* what) const;

  const PsServiceOptions options_;
  const uint64_t fingerprint_;
  const uint64_t instance_;  // kHelloReply's: this process, as opposed to a restarted one
  // The step this process's values started from: a checkpoint's, or the chief's init (a re-seed
  // after a restart without one); -1 before either. Read by every connection's hello.
  std::atomic<int64_t> restored_step_ = -1;
  const size_t arena_floats_;  // of the model's parameter arena, where kPullRef's values land
  std::unique_ptr<ShardStore> store_;
  size_t max_shard_size_ = 0;

  // Each training worker's state as this task sees it, guarded by workers_mutex_.
  struct WorkerState {
    int connections = 0;  // open connections that said hello as this worker
    bool seen = false;    // said hello at least once
    bool done = false;
    bool given_up = false;
    std::optional<std::chrono::steady_clock::time_point> lost_since;
    std::optional<std::string> failure;  // why it said it failed (kWorkerFailed)
    std::string address;                 // of its last connection
  };
  void worker_connected(int worker, const std::string& address);
  void worker_disconnected(int worker);
  // REQUIRES: workers_mutex_ held. Gives up on workers lost longer than worker_timeout_ms, and
  // on failed ones at once.
  void check_lost_workers();
  // REQUIRES: workers_mutex_ held. Where training has not finished, no worker is left, and some
  // said they failed: why (one line naming each worker), for run() to end with. Else empty.
  std::string all_workers_failed() const;
  // REQUIRES: workers_mutex_ held. Once training is finished, a worker that never connected is
  // waited for up to worker_timeout_ms (saying so), then given up: a ps never waits silently.
  void check_absent_workers();
  bool all_workers_accounted_for() const;
  // REQUIRES: workers_mutex_ held. One line naming the workers still waited for, if any.
  void report_waits() const;
  // REQUIRES: workers_mutex_ held. A stop was requested, and no worker is connected any more or
  // the shutdown timeout is near; the first call that sees the request halts the store.
  bool stopped();
  std::optional<std::chrono::steady_clock::time_point> stop_deadline_;  // guarded by workers_mutex_
  // The step of this task's first shard (0 if it holds none): what its messages report.
  int64_t current_step() const;

  std::mutex workers_mutex_;
  static constexpr int kChief = 0;  // the worker that initialises the variables
  std::mutex init_mutex_;
  // The chief process whose init set the variables (restored ones: none), guarded by init_mutex_.
  std::optional<uint64_t> initialized_by_;
  std::condition_variable workers_changed_;
  std::vector<WorkerState> workers_;  // guarded by workers_mutex_
  // When run() first saw training finished, guarded by workers_mutex_.
  std::optional<std::chrono::steady_clock::time_point> finished_since_;

  std::unique_ptr<Server> server_;  // last: its threads use everything above
};

}  // namespace dtrain
