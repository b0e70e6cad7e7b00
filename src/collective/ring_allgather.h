// Ring all-gather over RingLinks: every rank contributes a block of the same length and ends with
// every rank's block, in rank order. Vocabulary as ring_schedule.h, with the n blocks as the
// segments: in step s (0 .. n-2) rank r passes block (r - s) mod n to its right and receives block
// (r - s - 1) mod n from its left, so every rank sends and receives (n-1)/n of the result, the
// least any algorithm can. Blocks are cut into chunks that pipeline as in ring_allreduce.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "collective/ring_links.h"

namespace dtrain {

// Writes every rank's `mine` into `all` at [rank * mine.size(), (rank + 1) * mine.size()). `mine`
// may be that very block of `all` (in place); otherwise it must not overlap `all`. Bits travel
// unchanged: nothing on the way computes with the floats, so they may carry any data.
// REQUIRES: all.size() == n * mine.size(); every rank calls it with the same op_id, mine.size()
// and max_chunk_floats > 0.
void ring_allgather(RingLinks& links, uint64_t op_id, std::span<const float> mine,
                    std::span<float> all, size_t max_chunk_floats);

}  // namespace dtrain
