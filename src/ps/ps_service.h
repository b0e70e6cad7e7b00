// A parameter-server task on the wire: a ShardStore behind an authenticated comm::Server, one
// thread per worker connection, speaking ps/ps_protocol.h. Unlike TensorFlow's server.join(), it
// knows when training is over: run() returns once every training worker has reported done
// (ps/worker_roster.h). In sync mode, and where payloads travel by reference (comm/link_setup.h),
// each connection also has a replier thread (ps/push_replier.h). A task given LearnSettings listens
// before it knows what the job trains, and builds its store from what the chief says.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

#include "base/stop_request.h"
#include "comm/meta_codec.h"
#include "comm/server.h"
#include "nn/param_set.h"
#include "ps/partition.h"
#include "ps/ps_protocol.h"
#include "ps/ps_service_options.h"
#include "ps/push_replier.h"
#include "ps/shard_store.h"
#include "ps/worker_pace.h"
#include "ps/worker_roster.h"

namespace dtrain {

class PsService {
 public:
  // Allocates the store, initialises it from `restored` when given, and starts listening: a
  // reconnecting worker never finds the shards uninitialised in between. With options.learn, only
  // listens: the store is built when the chief says the settings. Throws UsageError /
  // TransportError. REQUIRES: restored, if given, has the model's layout.
  explicit PsService(PsServiceOptions options, const PsRestoredState* restored = nullptr);
  ~PsService();
  PsService(const PsService&) = delete;
  PsService& operator=(const PsService&) = delete;

  uint16_t port() const { return server_->port(); }
  // Whether the task knows what it serves: from the start, or since the chief said it.
  bool configured() const { return configured_.load(std::memory_order_acquire); }
  // REQUIRES: configured().
  const ShardStore& store() const { return *store_; }
  // Workers with a connection to this task now.
  int connected_workers() { return configured() ? roster_->connected_workers() : 0; }
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
  // worker is connected; then lets the requests being handled be answered (a wait for the chief's
  // initialisation, which a stop ends, answers at once) and stops the server. Throws Error naming
  // the lost worker when the sync policy is kStop and a step can no longer complete.
  void run();
  // Prints what this task did: steps, applied updates, stale and duplicate pushes, connections.
  void print_summary(std::ostream& out) const;

 private:
  struct Scratch;  // a connection's buffers, sized once

  // The store, roster and pace for options_ (settled: given, or learnt), then configured().
  void configure(const PsRestoredState* restored);
  // kSettings: what the worker trains, compared with this task's (or, from the chief to a task
  // that learns, taken).
  void settings(Connection& connection, const Connection::Incoming& in);
  // From the chief's settings: options_ learnt, the store built. Throws Error naming what the
  // task cannot take. Called with configure_mutex_ held.
  void learn(const nlohmann::json& chief);
  // Until configured() or a stop; says every wait_report_interval_ms that it waits.
  bool wait_configured();
  void serve(Connection& connection);
  void handle(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  void hello(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  // Gives the connection its replier thread, unless it has one.
  void start_replier(Connection& connection, Scratch& scratch);
  void init(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  void wait_ready(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  void pull(Connection& connection, bool with_slots, Scratch& scratch);
  // kPush: the gradient received, then applied and answered by apply_push.
  void push(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  // Throws Error for a push this task must refuse (a shard held elsewhere, another worker's).
  void check_push(const Connection& connection, const ps_protocol::PushMeta& m,
                  const Scratch& scratch) const;
  void apply_push(Connection& connection, uint64_t request_id, const ps_protocol::PushMeta& m,
                  Scratch& scratch);
  void worker_done(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  // kClaimWorker (ps0 of an async job that takes joiners): the identity of a worker that joins.
  void claim_worker(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
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

  // Settled once, before configured_ is set (learnt from the chief, or given); read-only after.
  PsServiceOptions options_;
  nlohmann::json settings_;  // options_.settings parsed (null: not checked)
  uint64_t fingerprint_ = 0;
  std::atomic<bool> configured_ = false;
  std::mutex configure_mutex_;
  std::condition_variable configured_changed_;
  const uint64_t instance_;  // kHelloReply's: this process, as opposed to a restarted one
  // The step this process's values started from: a checkpoint's, or the chief's init (a re-seed
  // after a restart without one); -1 before either. Read by every connection's hello.
  std::atomic<int64_t> restored_step_ = -1;
  std::unique_ptr<ShardStore> store_;
  size_t max_shard_size_ = 0;

  static constexpr int kChief = 0;  // the worker that initialises the variables
  std::mutex init_mutex_;
  // The chief process whose init set the variables (restored ones: none), guarded by init_mutex_.
  std::optional<uint64_t> initialized_by_;
  std::unique_ptr<WorkerRoster> roster_;
  std::unique_ptr<WorkerPace> pace_;  // ps0's
  std::optional<PushReplyContext> reply_context_;
  // Requests received and not yet answered, over every connection: stopping the server closes
  // the connections, so run() first lets these finish.
  class InFlight;
  static constexpr std::chrono::seconds kAnswerGrace{2};
  std::mutex requests_mutex_;
  std::condition_variable requests_done_;
  int requests_in_flight_ = 0;  // guarded by requests_mutex_

  std::unique_ptr<Server> server_;  // last: its threads use everything above
};

}  // namespace dtrain
