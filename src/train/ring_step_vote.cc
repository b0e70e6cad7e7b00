#include "train/ring_step_vote.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

namespace dtrain {

std::array<float, RingStepVote::kSignals.size()> RingStepVote::vote(int own_signal) {
  // The own times of the others are zero here: the sum makes each rank's known to every rank.
  votes_.assign(kSignals.size() + static_cast<size_t>(ring_.size()), 0.0f);
  for (size_t i = 0; i < kSignals.size(); ++i) votes_[i] = own_signal == kSignals[i] ? 1.0f : 0.0f;
  votes_[kSignals.size() + static_cast<size_t>(ring_.rank())] = own_seconds_;
  ring_.communicator().allreduce(votes_, ReduceOp::kSum);
  collective_ended();
  std::array<float, kSignals.size()> counts{};
  for (size_t i = 0; i < kSignals.size(); ++i) counts[i] = votes_[i];
  if (!ring_.chief()) return counts;
  const auto name = [this](int rank) { return ring_.name_of(rank); };
  const std::span<const float> own = std::span(votes_).subspan(kSignals.size());
  for (const std::string& line : stragglers_.observe(own, name)) {
    fmt::print(out_, "{}: {}\n", ring_.name(), line);
    out_ << std::flush;
  }
  if (observer_) observer_(stragglers_.times(own, name));
  return counts;
}

std::string RingStepVote::take_summary() {
  if (!ring_.chief() || ring_.size() < 2) return {};
  return stragglers_.take_summary([this](int rank) { return ring_.name_of(rank); });
}

}  // namespace dtrain
