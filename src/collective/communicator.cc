// Numbers the collectives and keeps the scratch buffer; the algorithms are in ring_allreduce.cc.
#include "collective/communicator.h"

#include <algorithm>
#include <stdexcept>

namespace dtrain {

Communicator::Communicator(RingLinks& links, CollectiveOptions options)
    : links_(links), options_(options) {
  if (options_.max_chunk_bytes < sizeof(float)) {
    throw std::invalid_argument("CollectiveOptions::max_chunk_bytes must hold one float");
  }
}

size_t Communicator::max_chunk_floats() const { return options_.max_chunk_bytes / sizeof(float); }

void Communicator::allreduce(std::span<float> data, ReduceOp op) {
  const size_t needed = std::min(data.size(), max_chunk_floats());
  if (scratch_.size() < needed) scratch_.resize(needed);
  ring_allreduce(links_, next_op_++, data, op, max_chunk_floats(), scratch_);
}

void Communicator::broadcast(std::span<float> data) {
  ring_broadcast(links_, next_op_++, data, max_chunk_floats());
}

void Communicator::barrier() { allreduce({}, ReduceOp::kSum); }

}  // namespace dtrain
