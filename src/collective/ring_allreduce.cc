// The ring algorithms as loops over steps and chunks; the offsets come from ring_schedule.h.
#include "collective/ring_allreduce.h"

#include <fmt/format.h>

#include "collective/accumulate.h"
#include "collective/ring_schedule.h"

namespace dtrain {

std::string to_string(const ChunkTag& tag) {
  return fmt::format("op {} step {} chunk {}", tag.op, tag.step, tag.chunk);
}

void ring_allreduce(RingLinks& links, uint64_t op_id, std::span<float> data, ReduceOp op,
                    size_t max_chunk_floats, std::span<float> scratch) {
  const int n = links.size();
  const int rank = links.rank();
  if (n == 1) return;  // the sum and the average over one rank are its own values
  const size_t chunks = chunks_per_segment(data.size(), n, max_chunk_floats);
  const int steps = 2 * (n - 1);
  const int last_reduce_step = n - 2;
  const float scale = op == ReduceOp::kAverage ? 1.0f / static_cast<float>(n) : 1.0f;
  auto chunk_of = [&](int segment, size_t c) {
    const Range range = segment_chunk(ring_segment(data.size(), n, segment), chunks, c);
    return data.subspan(range.begin, range.size);
  };
  auto tag = [&](int step, size_t c) {
    return ChunkTag{op_id, static_cast<uint32_t>(step), static_cast<uint32_t>(c)};
  };

  for (size_t c = 0; c < chunks; ++c)
    links.send_right(chunk_of(sent_segment(rank, n, 0), c), tag(0, c));
  for (int step = 0; step < steps; ++step) {
    const int segment = received_segment(rank, n, step);
    for (size_t c = 0; c < chunks; ++c) {
      std::span<float> chunk = chunk_of(segment, c);
      if (step <= last_reduce_step) {
        std::span<float> received = scratch.first(chunk.size());
        links.recv_left(received, tag(step, c));
        dtrain::accumulate(chunk, received, step == last_reduce_step ? scale : 1.0f);
      } else {
        // All-gather writes in place. Safe: the left neighbour could only complete this segment
        // after our own earlier message about it had reached the rank to our right, so that
        // message has left this memory.
        links.recv_left(chunk, tag(step, c));
      }
      // What we received at this step is what we send at the next (received_segment(step) ==
      // sent_segment(step + 1)), so each chunk moves on as soon as it is ready.
      if (step + 1 < steps) links.send_right(chunk, tag(step + 1, c));
    }
  }
  links.wait_sent();
}

void ring_broadcast(RingLinks& links, uint64_t op_id, std::span<float> data,
                    size_t max_chunk_floats, int root) {
  const int n = links.size();
  if (n == 1) return;
  // The chain starts at the root and ends at its left neighbour.
  const int position = (links.rank() - root + n) % n;
  const Range whole{0, data.size()};
  const size_t chunks =
      std::max<size_t>(1, (data.size() + max_chunk_floats - 1) / max_chunk_floats);
  for (size_t c = 0; c < chunks; ++c) {
    const Range range = segment_chunk(whole, chunks, c);
    std::span<float> chunk = data.subspan(range.begin, range.size);
    const ChunkTag tag{op_id, 0, static_cast<uint32_t>(c)};
    if (position != 0) links.recv_left(chunk, tag);
    if (position != n - 1) links.send_right(chunk, tag);
  }
  links.wait_sent();
}

}  // namespace dtrain
