// Which part of the buffer moves at each step of the ring algorithms: pure offset arithmetic,
// tested on its own. Vocabulary (also ring_allreduce.h): the buffer of `length` floats is cut into
// n segments, one per rank; a segment is cut into chunks, the unit of one message; a step is one
// round in which every rank sends one segment to its right and receives one from its left.
#pragma once

#include <cstddef>

namespace dtrain {

struct Range {
  size_t begin = 0;
  size_t size = 0;
  bool operator==(const Range&) const = default;
};

// Segment k of a buffer of `length` floats cut into n near-equal parts: the first length % n
// segments are one float longer. Segments may be empty when length < n.
// REQUIRES: n >= 1, 0 <= k < n.
Range ring_segment(size_t length, int n, int k);

// How many chunks every segment is cut into so that none exceeds max_chunk_floats: the same count
// for every segment (so every step has the same messages), and at least one, so that even empty
// segments send a message and every step synchronises the ranks. REQUIRES: max_chunk_floats > 0.
size_t chunks_per_segment(size_t length, int n, size_t max_chunk_floats);

// Chunk c of `segment` cut into `chunks` near-equal parts, as an absolute range of the buffer.
// REQUIRES: c < chunks.
Range segment_chunk(Range segment, size_t chunks, size_t c);

// Reduce-scatter is steps 0 .. n-2 and all-gather steps n-1 .. 2n-3; in both phases rank r sends
// segment (r - step) mod n and receives segment (r - step - 1) mod n. After reduce-scatter rank r
// holds the complete sum of segment (r + 1) mod n, which is what it sends first in all-gather.
int sent_segment(int rank, int n, int step);
int received_segment(int rank, int n, int step);

}  // namespace dtrain
