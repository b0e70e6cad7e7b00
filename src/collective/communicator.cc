// Numbers the collectives, keeps the scratch buffer and picks the all-reduce algorithm; the
// algorithms are in ring_allreduce.cc and halving_doubling.cc.
#include "collective/communicator.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "collective/halving_doubling.h"

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
  if (use_halving_doubling(data.size_bytes())) {
    halving_doubling_allreduce(links_, next_op_++, data, op, max_chunk_floats(), scratch_);
  } else {
    ring_allreduce(links_, next_op_++, data, op, max_chunk_floats(), scratch_);
  }
}

bool Communicator::use_halving_doubling(size_t bytes) const {
  if (!halving_doubling_fits(size())) return false;
  switch (options_.algorithm) {
    case AllreduceAlgorithm::kRing:
      return false;
    case AllreduceAlgorithm::kHalvingDoubling:
      return true;
    case AllreduceAlgorithm::kAuto:
      break;
  }
  return bytes <= options_.halving_doubling_max_bytes;
}

void Communicator::broadcast(std::span<float> data) {
  ring_broadcast(links_, next_op_++, data, max_chunk_floats());
}

// The links carry floats: the bytes travel packed into as many as hold them. Nothing on the way
// computes with those floats, so any bit pattern arrives as it left.
void Communicator::broadcast_bytes(std::span<std::byte> data) {
  std::vector<float> packed((data.size() + sizeof(float) - 1) / sizeof(float));
  if (!data.empty()) std::memcpy(packed.data(), data.data(), data.size());
  broadcast(packed);
  if (!data.empty()) std::memcpy(data.data(), packed.data(), data.size());
}

void Communicator::barrier() { allreduce({}, ReduceOp::kSum); }

}  // namespace dtrain
