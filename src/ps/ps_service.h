// A parameter-server task on the wire: a ShardStore behind an authenticated comm::Server, one
// thread per worker connection, speaking ps/ps_protocol.h. Unlike TensorFlow's server.join(), it
// knows when training is over: run() returns once every training worker has reported done.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "comm/server.h"
#include "nn/param_set.h"
#include "ps/partition.h"
#include "ps/shard_store.h"

namespace dtrain {

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
};

class PsService {
 public:
  // Allocates the store and starts listening. Throws UsageError / TransportError.
  explicit PsService(PsServiceOptions options);
  ~PsService();
  PsService(const PsService&) = delete;
  PsService& operator=(const PsService&) = delete;

  uint16_t port() const { return server_->port(); }
  const ShardStore& store() const { return *store_; }
  const ServerStats stats() const { return server_->stats(); }

  // Initialises the shards this task holds from whole-model values and optimizer slots (one
  // ParamSet per slot, in the store's order), as the chief's kInit would: a restore from a
  // checkpoint. REQUIRES: before any worker connects; the sets have the model's layout.
  void initialize_from(const ParamSet& params, const std::vector<ParamSet>& slots, int64_t step);

  // Blocks until every training worker (0..total_num_replicas-1) has reported done, then stops
  // the server.
  void run();
  // Prints what this task did: steps, applied updates, stale and duplicate pushes, connections.
  void print_summary(std::ostream& out) const;

 private:
  struct Scratch;  // a connection's buffers, sized once

  void serve(Connection& connection);
  void handle(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  void hello(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  void init(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  void wait_ready(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  void pull(Connection& connection, bool with_slots, Scratch& scratch);
  void push(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  void worker_done(Connection& connection, const Connection::Incoming& in, Scratch& scratch);
  // The shard named by a request, checked to be held here; throws Error otherwise.
  size_t held_shard(uint32_t shard) const;

  const PsServiceOptions options_;
  const uint64_t fingerprint_;
  std::unique_ptr<ShardStore> store_;
  size_t max_shard_size_ = 0;

  std::mutex done_mutex_;
  std::condition_variable done_changed_;
  std::set<int> done_workers_;  // guarded by done_mutex_

  std::unique_ptr<Server> server_;  // last: its threads use everything above
};

}  // namespace dtrain
