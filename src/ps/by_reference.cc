// Payloads copied between a ps task's store and a worker's memory.
#include "ps/by_reference.h"

#include <fmt/format.h>

#include "base/error.h"
#include "comm/peer_memory.h"
#include "ps/push_replier.h"

namespace dtrain {

namespace proto = ps_protocol;

std::string shm_failure(int ps, std::string_view worker, std::string_view why) {
  return fmt::format(
      "--transport shm: ps{} and {} cannot move payloads through memory: {}; run them with "
      "--transport tcp or auto",
      ps, worker, why);
}

void pull_into_worker_memory(const ShardStore& store, const PartitionMap& map,
                             const proto::MemoryRef& arena, size_t arena_floats, int32_t pid,
                             Connection& connection, proto::MetaWriter& meta) {
  const size_t arena_bytes = arena_floats * sizeof(float);
  if (arena.bytes != arena_bytes) {
    throw Error(fmt::format("{} sent a pull into an arena of {} bytes; the model's has {}",
                            connection.peer(), arena.bytes, arena_bytes));
  }
  for (size_t shard : store.shards()) {
    const uint64_t address = arena.address + map.shards[shard].begin * sizeof(float);
    const int64_t step = store.read_to(shard, [&](std::span<const float> values) {
      write_peer_memory(pid, address, std::as_bytes(values), connection.peer());
    });
    meta.clear();
    proto::write(meta, shard_reply(store, static_cast<uint32_t>(shard), step));
    connection.send(proto::kValues, 0, meta.bytes(), {});
  }
}

void read_pushed_gradient(const proto::PushMeta& push, const proto::MemoryRef& grad,
                          const proto::MemoryRef& values, int32_t pid, const Connection& connection,
                          std::span<float> into) {
  const size_t bytes = into.size_bytes();
  if (grad.bytes != bytes || values.bytes != (push.want_values ? bytes : 0)) {
    throw Error(fmt::format(
        "{} sent a push by reference for shard {} of {} bytes, with {} bytes for its values; the "
        "shard has {}",
        connection.peer(), push.shard, grad.bytes, values.bytes, bytes));
  }
  read_peer_memory(pid, grad.address, std::as_writable_bytes(into), connection.peer());
}

[[noreturn]] void read_to_the_end(Connection& connection) {
  for (;;) {
    const Connection::Incoming in = connection.receive();  // throws at the end
    if (in.tensor_bytes > 0) connection.discard_tensors();
  }
}

}  // namespace dtrain
