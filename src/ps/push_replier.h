// The replies of a ps task that carry a shard's values and step: a pull's, and a push's, which in
// sync mode waits for the push's step to complete. A connection's PushReplier thread sends the
// push replies that wait, or, by reference, that copy values into the worker while the
// connection's own thread goes on reading and applying the next push.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <span>
#include <stop_token>
#include <string>
#include <thread>

#include "comm/connection.h"
#include "ps/ps_protocol.h"
#include "ps/shard_store.h"
#include "tensor/aligned.h"

namespace dtrain {

// What every push reply of a task needs to know. REQUIRES: store outlives its users.
struct PushReplyContext {
  const ShardStore& store;
  int ps = 0;                // this task's index, for messages
  int sync_wait_ms = 0;      // PsServiceOptions::sync_wait_ms
  int stall_warning_ms = 0;  // PsServiceOptions::stall_warning_ms
};

// A push's reply, to be sent once the shard's step is past computed_at_step (if wait) or at
// once, in its turn.
struct DeferredReply {
  uint64_t request_id = 0;
  uint32_t shard = 0;
  uint8_t outcome = 0;
  int64_t step = 0;  // the shard's step after the push
  int64_t computed_at_step = 0;
  bool wait = false;
  bool want_values = false;
  std::chrono::steady_clock::time_point deadline;
};

// kError to the peer, saying why its request was refused.
void send_ps_error(Connection& connection, const std::string& message);
// The reply of a shard at `step`, with whether training is over and the task is halting.
ps_protocol::ShardReply shard_reply(const ShardStore& store, uint32_t shard, int64_t step,
                                    uint8_t outcome = 0);
// A frame of `type` (kValues, kPushReply) with the shard's values and reply. By reference they
// go straight from the store into the place the worker offered for them (Connection::
// offer_landing), under the shard's lock; a worker that offered none copies them out of the
// store, the shard locked until it has. By value they are copied into `buffer` first, so that
// the lock is not held while they travel.
void send_shard_values(const ShardStore& store, Connection& connection, uint16_t type,
                       uint64_t request_id, uint32_t shard, uint8_t outcome,
                       std::span<float> buffer, ps_protocol::MetaWriter& meta);
// The reply to a push once its step allows: the shard's values (if asked) and step, or an error
// saying why the step will not come.
// Blocks up to the reply's deadline; stop, or the connection's end, ends the wait unanswered.
void send_push_reply(const PushReplyContext& context, Connection& connection,
                     const DeferredReply& reply, std::span<float> buffer,
                     ps_protocol::MetaWriter& meta, const std::stop_token& stop);

// The sender of one connection's deferred replies, in the order they were deferred. The
// connection's own thread sends its replies itself only while nothing is deferred (idle()), so
// the connection always has one sender at a time. A reply that fails closes the connection
// (waking its thread), and the failure is rethrown by the next idle, defer or drain.
class PushReplier {
 public:
  // buffer_floats: the largest shard's values.
  PushReplier(const PushReplyContext& context, Connection& connection, size_t buffer_floats);
  ~PushReplier();
  PushReplier(const PushReplier&) = delete;
  PushReplier& operator=(const PushReplier&) = delete;

  bool idle();
  void defer(const DeferredReply& reply);
  // Blocks until every deferred reply has been sent.
  void drain();

 private:
  void loop(std::stop_token stop);
  // REQUIRES: mutex_ held.
  void rethrow_failure() const;

  const PushReplyContext context_;
  Connection& connection_;
  FloatBuffer buffer_;  // the values of the reply being sent
  ps_protocol::MetaWriter meta_;
  std::mutex mutex_;
  std::condition_variable_any changed_;
  std::deque<DeferredReply> queue_;  // guarded by mutex_
  std::exception_ptr failure_;       // guarded by mutex_
  std::jthread thread_;              // last: it uses everything above
};

}  // namespace dtrain
