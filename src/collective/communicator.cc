// Numbers the collectives, keeps the scratch buffer and picks the all-reduce algorithm; the
// algorithms are in ring_allreduce.cc and halving_doubling.cc.
#include "collective/communicator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "collective/halving_doubling.h"
#include "collective/ring_allgather.h"

namespace dtrain {
namespace {

// The links carry floats, and nothing on the way computes with the broadcast's or the
// all-gather's: any bytes travel as the floats that overlay them, bit for bit. Whole, aligned
// floats need no copy; others travel packed into as many floats as hold them.
bool lies_as_floats(const std::byte* data, size_t bytes) {
  return bytes % sizeof(float) == 0 && reinterpret_cast<uintptr_t>(data) % alignof(float) == 0;
}

std::span<float> as_floats(std::span<std::byte> data) {
  return {reinterpret_cast<float*>(data.data()), data.size() / sizeof(float)};
}

size_t floats_holding(size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float); }

}  // namespace

Communicator::Communicator(RingLinks& links, CollectiveOptions options)
    : links_(links), options_(options) {
  if (options_.max_chunk_bytes < sizeof(float)) {
    throw std::invalid_argument("CollectiveOptions::max_chunk_bytes must hold one float");
  }
}

size_t Communicator::max_chunk_floats() const { return options_.max_chunk_bytes / sizeof(float); }

void Communicator::allreduce(std::span<float> data, ReduceOp op, int bucket) {
  links_.note({.kind = data.empty() ? "barrier" : "all-reduce",
               .bytes = data.size_bytes(),
               .bucket = bucket});
  const size_t needed = std::min(data.size(), max_chunk_floats());
  if (scratch_.size() < needed) scratch_.resize(needed);
  if (use_halving_doubling(data.size_bytes())) {
    halving_doubling_allreduce(links_, next_op_++, data, op, max_chunk_floats(), scratch_);
  } else {
    ring_allreduce(links_, next_op_++, data, op, max_chunk_floats(), scratch_);
  }
}

// The one place where a bucket's bytes become the floats the algorithms sum: a codec will decode
// into float32 before it.
void Communicator::allreduce(TypedSpan data, ReduceOp op, int bucket) {
  allreduce(data.float32("all-reduce"), op, bucket);
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

void Communicator::check_root(int root) const {
  if (root < 0 || root >= size()) {
    throw UsageError(fmt::format("broadcast from rank {}: not a rank of this group of {} (0..{})",
                                 root, size(), size() - 1));
  }
}

void Communicator::broadcast(std::span<float> data, int root) {
  // A root that is no rank is this caller's mistake, refused before anything is sent.
  check_root(root);
  agree_on_root(root);
  links_.note({.kind = "broadcast", .bytes = data.size_bytes(), .bucket = -1});
  ring_broadcast(links_, next_op_++, data, max_chunk_floats(), root);
}

// Ranks that name different roots would each send and none receive, or wait for a chunk that no
// rank sends: every rank must fail alike instead, at once, and with the group still usable.
void Communicator::agree_on_root(int root) {
  if (size() == 1) return;
  const float mine = static_cast<float>(root);
  std::vector<float> roots(static_cast<size_t>(size()));
  allgather(std::span<const float>(&mine, 1), roots);
  if (std::all_of(roots.begin(), roots.end(), [&](float r) { return r == roots[0]; })) return;
  // Each root named, with the ranks that named it: the same words on every rank.
  std::vector<std::pair<float, std::vector<int>>> named;
  for (int r = 0; r < size(); ++r) {
    auto it = std::find_if(named.begin(), named.end(),
                           [&](const auto& n) { return n.first == roots[static_cast<size_t>(r)]; });
    if (it == named.end()) it = named.insert(named.end(), {roots[static_cast<size_t>(r)], {}});
    it->second.push_back(r);
  }
  std::string which;
  for (const auto& [named_root, ranks] : named) {
    if (!which.empty()) which += ", ";
    which += fmt::format("root {} from rank{} {}", named_root, ranks.size() > 1 ? "s" : "",
                         fmt::join(ranks, " "));
  }
  throw UsageError(fmt::format(
      "broadcast: the ranks name different roots ({}); every rank must broadcast from the same "
      "root (this is rank {}, which named {})",
      which, rank(), root));
}

void Communicator::broadcast_bytes(std::span<std::byte> data, int root) {
  if (lies_as_floats(data.data(), data.size())) {
    broadcast(as_floats(data), root);
    return;
  }
  std::vector<float> packed(floats_holding(data.size()));
  if (!data.empty()) std::memcpy(packed.data(), data.data(), data.size());
  broadcast(packed, root);
  if (!data.empty()) std::memcpy(data.data(), packed.data(), data.size());
}

void Communicator::allgather(std::span<const float> mine, std::span<float> all) {
  if (all.size() != mine.size() * static_cast<size_t>(size())) {
    throw UsageError(
        fmt::format("allgather: the output holds {} floats, but {} ranks of {} floats need {}",
                    all.size(), size(), mine.size(), mine.size() * static_cast<size_t>(size())));
  }
  links_.note({.kind = "all-gather", .bytes = all.size_bytes(), .bucket = -1});
  ring_allgather(links_, next_op_++, mine, all, max_chunk_floats());
}

void Communicator::allgather_bytes(std::span<const std::byte> mine, std::span<std::byte> all) {
  const size_t n = static_cast<size_t>(size());
  if (all.size() != mine.size() * n) {
    throw UsageError(
        fmt::format("allgather: the output holds {} bytes, but {} ranks of {} bytes need {}",
                    all.size(), size(), mine.size(), mine.size() * n));
  }
  if (lies_as_floats(mine.data(), mine.size()) && lies_as_floats(all.data(), all.size())) {
    const std::span<const float> floats{reinterpret_cast<const float*>(mine.data()),
                                        mine.size() / sizeof(float)};
    allgather(floats, as_floats(all));
    return;
  }
  const size_t block = floats_holding(mine.size());
  std::vector<float> packed(block * (n + 1));  // every rank's block, then this rank's own
  const std::span<float> own = std::span(packed).subspan(block * n, block);
  if (!mine.empty()) std::memcpy(own.data(), mine.data(), mine.size());
  allgather(own, std::span(packed).first(block * n));
  for (size_t r = 0; r < n && !mine.empty(); ++r) {
    std::memcpy(all.data() + r * mine.size(), packed.data() + r * block, mine.size());
  }
}

void Communicator::barrier() { allreduce(std::span<float>{}, ReduceOp::kSum); }

}  // namespace dtrain
