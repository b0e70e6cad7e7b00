// The replies to pushes, sent by the connection's thread or, deferred, by its replier.
#include "ps/push_replier.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <string>

#include "base/error.h"

namespace dtrain {

PushReplier::PushReplier(const PushReplyContext& context, Connection& connection,
                         size_t buffer_floats)
    : context_(context),
      connection_(connection),
      buffer_(buffer_floats),
      thread_([this](std::stop_token stop) { loop(stop); }) {}

PushReplier::~PushReplier() {
  thread_.request_stop();
  changed_.notify_all();
}

bool PushReplier::idle() {
  std::lock_guard lock(mutex_);
  rethrow_failure();
  return queue_.empty();
}

void PushReplier::defer(const DeferredReply& reply) {
  {
    std::lock_guard lock(mutex_);
    rethrow_failure();
    queue_.push_back(reply);
  }
  changed_.notify_all();
}

void PushReplier::drain() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return queue_.empty() || failure_; });
  rethrow_failure();
}

void PushReplier::loop(std::stop_token stop) {
  std::unique_lock lock(mutex_);
  while (!stop.stop_requested()) {
    changed_.wait(lock, stop, [&] { return !queue_.empty(); });
    if (queue_.empty()) continue;
    const DeferredReply reply = queue_.front();  // stays queued until sent: idle() is false
    lock.unlock();
    try {
      send_push_reply(context_, connection_, reply, buffer_, meta_, stop);
    } catch (...) {
      lock.lock();
      failure_ = std::current_exception();
      changed_.notify_all();
      // Wakes the connection's thread, blocked in a read, so that the connection ends.
      connection_.close();
      return;
    }
    lock.lock();
    queue_.pop_front();
    changed_.notify_all();
  }
}

void PushReplier::rethrow_failure() const {
  if (failure_) std::rethrow_exception(failure_);
}

void send_ps_error(Connection& connection, const std::string& message) {
  ps_protocol::MetaWriter meta;
  meta.put_string(message);
  connection.send(ps_protocol::kError, 0, meta.bytes(), {});
}

ps_protocol::ShardReply shard_reply(const ShardStore& store, uint32_t shard, int64_t step,
                                    uint8_t outcome) {
  return {.shard = shard,
          .outcome = outcome,
          .step = step,
          .finished = static_cast<uint8_t>(store.finished()),
          .halting = static_cast<uint8_t>(store.halting()),
          .worker_changes = store.worker_changes()};
}

void send_push_reply(const PushReplyContext& context, Connection& connection,
                     const DeferredReply& reply, std::span<float> buffer,
                     ps_protocol::MetaWriter& meta, const std::stop_token& stop) {
  const ShardStore& store = context.store;
  int64_t step = reply.step;
  if (reply.wait) {
    // In slices, so that a connection that ends (its peer gone, or the server stopping) stops
    // its wait soon.
    constexpr auto kSlice = std::chrono::milliseconds(200);
    const auto began = std::chrono::steady_clock::now();
    int reports = 0;  // --stall_warning: at the warning, then at doubling intervals
    while (!stop.stop_requested() && connection.is_open()) {
      const auto until = std::min(reply.deadline, std::chrono::steady_clock::now() + kSlice);
      step = store.wait_step_past(reply.shard, reply.computed_at_step, until);
      const auto now = std::chrono::steady_clock::now();
      if (step > reply.computed_at_step || store.finished() || store.halting() || store.aborted() ||
          now >= reply.deadline) {
        break;
      }
      if (context.stall_warning_ms > 0 &&
          now - began >=
              std::chrono::milliseconds(context.stall_warning_ms) * (1 << std::min(reports, 20))) {
        const double waited = std::chrono::duration<double>(now - began).count();
        if (auto line = store.stalled_step(reply.shard, reply.computed_at_step, reports, waited))
          spdlog::warn("ps{}: {}", context.ps, *line);
        ++reports;
      }
    }
    if (stop.stop_requested() || !connection.is_open()) return;
    std::optional<std::string> error = store.aborted();
    if (!error && step <= reply.computed_at_step && !store.finished() && !store.halting()) {
      error = fmt::format(
          "step {} of shard {} did not get its {} gradients within {} s: too few workers are "
          "pushing",
          reply.computed_at_step, reply.shard, store.replicas_to_aggregate(),
          context.sync_wait_ms / 1000);
    }
    if (error) {
      spdlog::warn("ps{}: refused a request from {}: {}", context.ps, connection.peer(), *error);
      send_ps_error(connection, fmt::format("ps{}: {}", context.ps, *error));
      return;
    }
  }
  if (reply.want_values) {
    send_shard_values(store, connection, ps_protocol::kPushReply, reply.request_id, reply.shard,
                      reply.outcome, buffer, meta);
    return;
  }
  meta.clear();
  ps_protocol::write(meta, shard_reply(store, reply.shard, step, reply.outcome));
  connection.send(ps_protocol::kPushReply, reply.request_id, meta.bytes(), {});
}

void send_shard_values(const ShardStore& store, Connection& connection, uint16_t type,
                       uint64_t request_id, uint32_t shard, uint8_t outcome,
                       std::span<float> buffer, ps_protocol::MetaWriter& meta) {
  const auto send = [&](std::span<const float> values, int64_t step) {
    meta.clear();
    ps_protocol::write(meta, shard_reply(store, shard, step, outcome));
    const std::span<const float> tensors[] = {values};
    connection.send(type, request_id, meta.bytes(), tensors);
  };
  if (connection.link_traits().in_memory) {
    store.read_to(shard, send);
    return;
  }
  const auto values = buffer.first(store.shard_size(shard));
  const int64_t step = store.read(shard, values);
  send(values, step);
}

}  // namespace dtrain
