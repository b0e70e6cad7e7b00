// Halving-doubling on four ranks: two exchanges that halve the block each rank is responsible
// for, then two that double it back.
#include "collective/halving_doubling.h"

#include <algorithm>
#include <utility>

#include "collective/accumulate.h"
#include "collective/ring_schedule.h"

namespace dtrain {

namespace {

// The first half is the longer one when the length is odd.
std::pair<Range, Range> halves(Range range) {
  const size_t first = range.size - range.size / 2;
  return {Range{range.begin, first}, Range{range.begin + first, range.size / 2}};
}

struct Exchange {
  RingLinks& links;
  uint64_t op_id;
  std::span<float> data;
  size_t max_chunk_floats;
  std::span<float> scratch;

  // At least one chunk, so that an empty range still exchanges a message and the step
  // synchronises the pair (the barrier relies on it).
  size_t chunks(Range range) const {
    return std::max<size_t>(1, (range.size + max_chunk_floats - 1) / max_chunk_floats);
  }
  ChunkTag tag(int step, size_t c) const {
    return ChunkTag{op_id, static_cast<uint32_t>(step), static_cast<uint32_t>(c)};
  }
  std::span<float> part(Range range, size_t count, size_t c) const {
    const Range chunk = segment_chunk(range, count, c);
    return data.subspan(chunk.begin, chunk.size);
  }

  // Sends `sent` to the partner on `side` while receiving the partner's copy of `received`: added
  // into ours (times scale) when reducing, written over it when gathering. The partner's `sent` is
  // our `received`, so both cut it into the same chunks. Every send is queued first, so both
  // directions stream at once.
  void run(int step, Side side, Range sent, Range received, bool reduce, float scale) const {
    const size_t out = chunks(sent);
    for (size_t c = 0; c < out; ++c) links.send(side, part(sent, out, c), tag(step, c));
    const size_t in = chunks(received);
    for (size_t c = 0; c < in; ++c) {
      std::span<float> chunk = part(received, in, c);
      if (reduce) {
        std::span<float> incoming = scratch.first(chunk.size());
        links.recv(side, incoming, tag(step, c));
        dtrain::accumulate(chunk, incoming, scale);
      } else {
        links.recv(side, chunk, tag(step, c));
      }
    }
  }
};

}  // namespace

void halving_doubling_allreduce(RingLinks& links, uint64_t op_id, std::span<float> data,
                                ReduceOp op, size_t max_chunk_floats, std::span<float> scratch) {
  const int rank = links.rank();
  // Partners: rank^1 first, then rank^3; on a ring of four each is a neighbour, on opposite sides.
  const Side first = rank % 2 == 0 ? Side::kRight : Side::kLeft;
  const Side second = opposite(first);
  // Which half a rank keeps at each halving. Partners must keep opposite halves of the block they
  // share: bit0^bit1 differs between r and r^1, bit1 between r and r^3 (whose bit0^bit1 agree),
  // and together the two bits give each rank its own quarter.
  const bool keep_second_half = ((rank ^ (rank >> 1)) & 1) != 0;
  const bool keep_second_quarter = ((rank >> 1) & 1) != 0;

  auto [h0, h1] = halves(Range{0, data.size()});
  const Range kept_half = keep_second_half ? h1 : h0;
  const Range other_half = keep_second_half ? h0 : h1;
  auto [q0, q1] = halves(kept_half);
  const Range kept_quarter = keep_second_quarter ? q1 : q0;
  const Range other_quarter = keep_second_quarter ? q0 : q1;
  const float scale = op == ReduceOp::kAverage ? 1.0f / static_cast<float>(links.size()) : 1.0f;

  const Exchange exchange{links, op_id, data, max_chunk_floats, scratch};
  exchange.run(0, first, other_half, kept_half, /*reduce=*/true, 1.0f);
  // After this exchange the kept quarter is final: its owner alone computed it, and the two
  // gathering exchanges only copy, so every rank ends bitwise identical.
  exchange.run(1, second, other_quarter, kept_quarter, /*reduce=*/true, scale);
  // Gathering writes in place over what this rank sent while halving. Safe: the partner only
  // sends this after it received all of that exchange, so those sends have left our memory.
  exchange.run(2, second, kept_quarter, other_quarter, /*reduce=*/false, 1.0f);
  exchange.run(3, first, kept_half, other_half, /*reduce=*/false, 1.0f);
  links.wait_sent();
}

}  // namespace dtrain
