// A worker's side of the parameter servers: one authenticated connection per ps task, and the
// operations a training loop needs — wait for the chief, initialise, pull, push-and-pull, pull the
// optimizer state for a checkpoint, report done. Every operation runs on all ps tasks at once, and
// on each connection the requests go out from one thread while the replies come in on another, so
// a model streams through the servers shard by shard; values land straight in the caller's arena.
// With a ps of this host, the connections' links move the payloads by reference
// (comm/link_setup.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/wait_watch.h"
#include "comm/connection.h"
#include "comm/host_port.h"
#include "comm/peer_wait.h"
#include "nn/param_set.h"
#include "ps/partition.h"
#include "ps/ps_client_options.h"
#include "ps/ps_lane.h"
#include "ps/ps_protocol.h"

namespace dtrain {

// What the pushes of one round did, over every shard.
struct RoundOutcome {
  int applied = 0, accepted = 0, duplicates = 0, stale = 0;
  int rejected = 0;  // gradients with a NaN or an infinity, dropped by the ps
};

// Through memory, the buffers an operation names (the gradient, the values' destination) are
// copied by the ps while the operation waits for its replies; the caller must not touch them until
// it returns, which every operation's blocking already ensures.
//
// A lost connection to a ps (it died, restarted, or the link broke) does not end the operation:
// the client reconnects with backoff (connect's retry, up to options.connection.connect_timeout_ms)
// and sends that ps's part of the operation again. A retried push carries its first sequence
// number, so a ps that had applied it answers kDuplicate (exactly once); a ps that restarted from
// a checkpoint applies it afresh, and the steps it lost are reported.
//
// Not thread-safe: one training loop drives it.
class PsClient {
 public:
  // Connects to every ps task (with retry, options.connection.connect_timeout_ms) and says hello;
  // a ps built for another layout answers with an Error naming the flags to check.
  // REQUIRES: map has one entry per address; layout is the model's parameters.
  PsClient(const ParamSet& layout, const PartitionMap& map, PsClientOptions options);
  ~PsClient();
  PsClient(const PsClient&) = delete;
  PsClient& operator=(const PsClient&) = delete;

  // Whether every ps already held initialised shards at hello (a restarted chief must not
  // overwrite them).
  bool initialized_at_hello() const { return initialized_at_hello_; }
  // Blocks until every ps is initialised or timeout_ms passes; returns whether they are.
  bool wait_ready(int timeout_ms);

  // The chief's initialisation or restore: every shard's values (and slots, one ParamSet per
  // optimizer slot in the ps's order, or none for zeros) at `step`.
  void initialize(const ParamSet& params, const std::vector<ParamSet>& slots, int64_t step);
  // Copies every shard's current values into params.
  void pull(ParamSet& params);
  // Pushes every shard's slice of grads at learning rate lr, and receives each shard's values
  // after the push into params. Sync: each gradient carries the step of the values it was
  // computed from: the global step of the last pull or push_pull (see push_pull), and the reply
  // waits for the step's R gradients.
  RoundOutcome push_pull(const GradSet& grads, ParamSet& params, float lr);
  // Values and optimizer slots, for the chief's checkpoints.
  void pull_state(ParamSet& params, std::vector<ParamSet>& slots);
  // Tells every ps that this worker is done (finished: the last step was reached, so sync waits
  // may be released); returns the counters summed over the ps tasks.
  ps_protocol::DoneReply worker_done(bool finished);
  // Tells every ps still connected that this worker ends with an error (why), so that a ps whose
  // workers have all failed ends at once rather than waiting for them; best effort, never
  // throws. REQUIRES: no operation under way.
  void report_failure(const std::string& why) noexcept;
  // The counters so far, summed over the ps tasks (for the chief's run log).
  ps_protocol::DoneReply counters();

  // The lowest step over every shard, as of the last reply: the global step.
  int64_t global_step() const;
  // A ps reported that training is over (sync: the last step was reached).
  bool finished() const { return finished_; }
  // A ps task said it is stopping (a signal asked it to): the worker should stop too.
  bool halting() const { return halting_; }
  uint64_t next_sequence() const { return sequence_; }
  // A job that counts its workers: how many changes of them ps0 had seen at its last reply (the
  // newest comes with counters()).
  uint32_t worker_changes() const { return worker_changes_; }
  // What the link to ps `ps` does (comm/link.h), as of the last (re)connection, and which way its
  // payloads go, for a start-up line (Connection::describe_link). REQUIRES: 0 <= ps < the number
  // of ps tasks.
  LinkTraits link_traits(int ps) const;
  std::string describe_link(int ps) const;

 private:
  using Lane = PsLane;

  // Runs send(lane) on each lane's sender thread and receive(lane) on its receiver thread, every
  // lane at once, and waits for all; rethrows the first error. With by_caller, where every lane
  // moves its payloads by reference (so that every frame is small), this thread sends every
  // lane's requests and then reads each lane's replies itself instead. Sends are to post(): each
  // lane's are settled once its replies are in.
  template <typename Send, typename Receive>
  void round(Send&& send, Receive&& receive, bool by_caller = false);
  // The chief's answer to a ps that came back without its variables: every shard of it from
  // options.reseed_from, at `step`, without optimizer slots.
  void reseed(Lane& lane, int64_t step);
  // The other workers': waits (within wait) until the chief has re-seeded the ps, then says hello
  // again and returns its step. Throws Error once wait's deadline passes.
  int64_t wait_reseeded(Lane& lane, PeerWait& wait);
  // A round whose replies carry counters (kDoneReply, kCountersReply), summed over the lanes.
  ps_protocol::DoneReply counters_round(uint16_t reply_type,
                                        const std::function<void(Lane&)>& request);
  void note_reply(int ps, const ps_protocol::ShardReply& reply);
  // kSettings, before the hello (PsClientOptions::settings).
  void say_settings(Lane& lane);
  // The settings and the hello; returns the ps's step. Sends and receives on the calling thread.
  int64_t say_hello(Lane& lane);
  // A new connection and hello in place of a lost one, the lane's `losses`-th in this operation;
  // throws TransportError once deadline has passed. A ps that came back without its variables is
  // re-seeded (the chief) or waited for until it is (the others; Error at the deadline).
  void reconnect(Lane& lane, const std::string& why, std::chrono::steady_clock::time_point deadline,
                 int losses);
  void report(const std::string& line) const;

  const PartitionMap& map_;
  const PsClientOptions options_;
  uint64_t fingerprint_ = 0;
  const int worker_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<int64_t> shard_step_;  // each lane's receiver writes only its own shards' entries
  std::atomic<bool> finished_ = false;
  std::atomic<bool> halting_ = false;
  std::atomic<uint32_t> worker_changes_ = 0;
  std::mutex mutex_;  // guards what the lanes' receivers sum into: the fields below, and totals
  bool initialized_at_hello_ = true;
  uint64_t sequence_ = 0;
  std::unique_ptr<WaitWatch> wait_watch_;  // with options.stall_warning_ms
};

}  // namespace dtrain
