// Halving-doubling all-reduce (Rabenseifner: recursive-halving reduce-scatter, then
// recursive-doubling all-gather) for a ring of four. Every rank sends and receives the same
// 2(n-1)/n of the buffer as on the ring, but in 2 log2(n) = 4 exchanges instead of 2(n-1) = 6
// steps, which is what counts for messages of a few hundred KiB to a few MiB, where every step
// costs a round of wake-ups (bench allreduce --ranks 4 --algorithm). OpenMPI picks the same
// algorithm for these sizes.
//
// The partners are r^1 and then r^3, not the textbook r^1 and r^2: on a ring of four both are
// neighbours, so the ring's own connections carry every exchange, one each way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "collective/ring_allreduce.h"
#include "collective/ring_links.h"

namespace dtrain {

// Whether halving_doubling_allreduce can run on a ring of n ranks.
constexpr bool halving_doubling_fits(int n) { return n == 4; }

// ring_allreduce's contract (every rank ends bitwise identical, sum or average, any length),
// and `scratch` likewise holds one chunk. REQUIRES: halving_doubling_fits(links.size()).
void halving_doubling_allreduce(RingLinks& links, uint64_t op_id, std::span<float> data,
                                ReduceOp op, size_t max_chunk_floats, std::span<float> scratch);

}  // namespace dtrain
