// Offset arithmetic of the ring algorithms; see ring_schedule.h for the vocabulary.
#include "collective/ring_schedule.h"

#include <algorithm>

namespace dtrain {

namespace {

Range near_equal_part(size_t begin, size_t length, size_t parts, size_t i) {
  const size_t base = length / parts;
  const size_t longer = length % parts;  // the first `longer` parts get one more float
  return Range{begin + i * base + std::min(i, longer), base + (i < longer ? 1 : 0)};
}

int modulo(int value, int n) { return ((value % n) + n) % n; }

}  // namespace

Range ring_segment(size_t length, int n, int k) {
  return near_equal_part(0, length, static_cast<size_t>(n), static_cast<size_t>(k));
}

size_t chunks_per_segment(size_t length, int n, size_t max_chunk_floats) {
  const size_t longest = ring_segment(length, n, 0).size;
  return std::max<size_t>(1, (longest + max_chunk_floats - 1) / max_chunk_floats);
}

Range segment_chunk(Range segment, size_t chunks, size_t c) {
  return near_equal_part(segment.begin, segment.size, chunks, c);
}

int sent_segment(int rank, int n, int step) { return modulo(rank - step, n); }

int received_segment(int rank, int n, int step) { return modulo(rank - step - 1, n); }

}  // namespace dtrain
