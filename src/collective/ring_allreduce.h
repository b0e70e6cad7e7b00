// Ring all-reduce and ring broadcast over RingLinks (DESIGN.md §6). All-reduce is the
// bandwidth-optimal ring of Patarasuk and Yuan: reduce-scatter (n-1 steps) then all-gather (n-1
// steps), so every rank sends and receives 2(n-1)/n of the buffer whatever n is. Each segment is
// cut into chunks (ring_schedule.h) that pipeline: a chunk goes on to the right as soon as it has
// been reduced, while the next chunk is still arriving from the left.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "collective/ring_links.h"

namespace dtrain {

enum class ReduceOp { kSum, kAverage };

// Replaces `data` on every rank by the element-wise sum (or average) over the ranks. Every rank
// ends with bitwise identical values: each element is reduced once, by one rank, and then copied.
// `scratch` receives one chunk: at least min(data.size(), max_chunk_floats) floats.
// REQUIRES: every rank calls it with the same op_id, data.size(), op and max_chunk_floats > 0.
void ring_allreduce(RingLinks& links, uint64_t op_id, std::span<float> data, ReduceOp op,
                    size_t max_chunk_floats, std::span<float> scratch);

// Copies rank `root`'s `data` into every other rank's, chunk by chunk along the ring root →
// root+1 → … → root-1. REQUIRES: as ring_allreduce, and the same root on every rank, 0 <= root < n.
void ring_broadcast(RingLinks& links, uint64_t op_id, std::span<float> data,
                    size_t max_chunk_floats, int root = 0);

}  // namespace dtrain
