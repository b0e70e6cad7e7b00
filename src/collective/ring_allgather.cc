// The all-gather as a loop over steps and chunks; the block arithmetic is ring_schedule.h's.
#include "collective/ring_allgather.h"

#include <algorithm>
#include <cstring>

#include "collective/ring_schedule.h"

namespace dtrain {

void ring_allgather(RingLinks& links, uint64_t op_id, std::span<const float> mine,
                    std::span<float> all, size_t max_chunk_floats) {
  const int n = links.size();
  const int rank = links.rank();
  const size_t block = mine.size();
  std::span<float> own = all.subspan(static_cast<size_t>(rank) * block, block);
  if (own.data() != mine.data() && block > 0) {
    std::memcpy(own.data(), mine.data(), block * sizeof(float));
  }
  if (n == 1) return;
  const size_t chunks = std::max<size_t>(1, (block + max_chunk_floats - 1) / max_chunk_floats);
  auto chunk_of = [&](int b, size_t c) {
    const Range range = segment_chunk(Range{static_cast<size_t>(b) * block, block}, chunks, c);
    return all.subspan(range.begin, range.size);
  };
  auto tag = [&](int step, size_t c) {
    return ChunkTag{op_id, static_cast<uint32_t>(step), static_cast<uint32_t>(c)};
  };

  const int steps = n - 1;
  for (size_t c = 0; c < chunks; ++c)
    links.send_right(chunk_of(sent_segment(rank, n, 0), c), tag(0, c));
  for (int step = 0; step < steps; ++step) {
    const int b = received_segment(rank, n, step);
    for (size_t c = 0; c < chunks; ++c) {
      // Safe to receive in place: no rank holds block b before this step, so nothing of ours
      // that is still on its way reads this memory.
      std::span<float> chunk = chunk_of(b, c);
      links.recv_left(chunk, tag(step, c));
      // The block received now is the one sent next (received_segment(step) ==
      // sent_segment(step + 1)): each chunk moves on as soon as it is in.
      if (step + 1 < steps) links.send_right(chunk, tag(step + 1, c));
    }
  }
  links.wait_sent();
}

}  // namespace dtrain
