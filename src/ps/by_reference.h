// A ps connection's payloads by reference (ps/ps_protocol.h's kPullRef and kPushRef), for a
// worker of this host that proved its memory reachable: values copied straight from the store into
// the worker's memory, and gradients out of it, with no frame between.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "comm/connection.h"
#include "ps/partition.h"
#include "ps/ps_protocol.h"
#include "ps/shard_store.h"

namespace dtrain {

// "--transport shm: ps0 and worker1 cannot move payloads through memory: <why>; ...".
std::string shm_failure(int ps, std::string_view worker, std::string_view why);

// kPullRef: each shard this task holds written into process `pid`'s parameter arena at `arena`,
// at the shard's place, each answered with a kValues frame without tensors. Throws Error where
// the arena is not the model's arena_floats, PeerProcessGone where the worker's process has gone.
void pull_into_worker_memory(const ShardStore& store, const PartitionMap& map,
                             const ps_protocol::MemoryRef& arena, size_t arena_floats, int32_t pid,
                             Connection& connection, ps_protocol::MetaWriter& meta);

// kPushRef: the push's gradient copied out of process `pid` into `into` (the shard's size).
// Throws Error where the gradient, or the place for the values, is not the shard's size.
void read_pushed_gradient(const ps_protocol::PushMeta& push, const ps_protocol::MemoryRef& grad,
                          const ps_protocol::MemoryRef& values, int32_t pid,
                          const Connection& connection, std::span<float> into);

// The worker's process has gone while its memory was being copied. Its connection ends too, once
// the kernel has closed its socket: reading on to that end (dropping the requests it had sent
// already) makes the loss the one a closed connection reports, named and counted alike.
[[noreturn]] void read_to_the_end(Connection& connection);

}  // namespace dtrain
