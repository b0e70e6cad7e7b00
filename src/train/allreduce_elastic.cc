// How an all-reduce worker follows an elastic job's membership (docs/elastic.md): it forms its ring
// from each view the job's coordinator settles, and when the ring fails or a change interrupts it,
// drops the step under way and takes, with every other member, the state of the member furthest
// along. A step's update is applied only after all of its all-reduces have completed, so a
// member's state is always that of a whole step: the furthest member either applied the
// interrupted step exactly as the old membership computed it (its all-reduce had completed) or
// did not, and either way every member continues from the same state, never from half of one.
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <utility>

#include "base/error.h"
#include "train/allreduce_strategy.h"

namespace dtrain {

void AllreduceStrategy::join_view(TrainingState& state, bool have_state) {
  const HostPort& own = config_.cluster.cluster.address(config_.cluster.task);
  for (;;) {
    communicator_.reset();
    ring_.reset();
    const MembershipView before = view_;
    try {
      view_ = membership_->next_view(have_state ? state.step : -1, own);
    } catch (const DroppedFromJob& dropped) {
      // The job went on without this worker: its state is no longer the job's, and it must not
      // train on as if it were. It comes back as a joiner, and takes the state of the members.
      fmt::print(out_, "{}: {}; joining the job again\n", name(), dropped.what());
      out_ << std::flush;
      membership_.reset();
      membership_ = std::make_unique<MembershipClient>(membership_options_);
      have_state = false;
      continue;
    }
    ++views_;
    const int rank = view_.rank_of(name());
    if (rank < 0) {
      throw Error(fmt::format("{}: the job's coordinator left this worker out of view {}", name(),
                              view_.id));
    }
    rank_ = rank;
    place_changed_ = true;
    // The view is settled whether or not its ring forms: what changed is said now.
    print_changes(view_, before);
    try {
      const HostPort& right = view_.members[static_cast<size_t>((rank_ + 1) % size())].address;
      std::unique_ptr<RingConnector> connector = tcp_ring_connector();
      connector->listen(ring_options(size(), rank_, right));
      ring_ = connector->connect();
      communicator_ = std::make_unique<Communicator>(
          *ring_, CollectiveOptions{.max_chunk_bytes = config_.chunk_bytes});
      int source = view_.source;
      if (view_.fresh) {
        source = 0;
        if (chief()) {
          state.initialize(c_.seed);
          if (const auto step = restore_()) state.step = *step;
          position_ = position_at(state.step);
        }
      }
      // A member that takes another's state holds none of its own until the copy is whole.
      have_state = have_state && rank_ == source;
      share_state(state, source);
      have_state = true;
      worker_counts_.emplace_back(state.step, size());
    } catch (const CollectiveError& error) {
      fmt::print(out_, "{}: the ring of membership view {} did not form: {}\n", name(), view_.id,
                 error.what());
      out_ << std::flush;
      continue;
    }
    print_links();
    return;
  }
}

void AllreduceStrategy::reform(TrainingState& state, const std::string& why) {
  fmt::print(out_, "{}: re-forming the ring at step {}: {}\n", name(), state.step, why);
  out_ << std::flush;
  join_view(state, /*have_state=*/true);
}

void AllreduceStrategy::print_changes(const MembershipView& view, const MembershipView& before) {
  for (const std::string& change : view.changes) {
    fmt::print(out_, "{}: {}: {} workers now\n", name(), change, view.size());
    if (change.find(" joined at ") != std::string::npos) {
      ++joined_;
    } else {
      ++left_;
    }
  }
  if (before.id == 0 || before.names() != view.names()) {
    fmt::print(out_, "{}: membership view {}: rank {} of {} ({}){}\n", name(), view.id, rank_,
               view.size(), fmt::join(view.names(), ", "), chief() ? ", the chief" : "");
  }
  out_ << std::flush;
}

DataPosition AllreduceStrategy::position_at(int64_t step) const {
  const int64_t global_batch = int64_t{c_.batch_size} * planned_workers_;
  const int64_t steps_per_epoch = std::max<int64_t>(1, train_examples_ / global_batch);
  return {step / steps_per_epoch, step % steps_per_epoch * global_batch};
}

int AllreduceStrategy::member_index() const {
  // The coordinator admits no other name, and this worker's own comes from its flags.
  return dtrain::member_index(name()).value_or(0);
}

std::optional<DataSlice> AllreduceStrategy::data_slice() const {
  if (!elastic()) return std::nullopt;
  return DataSlice{
      .index = rank_, .count = size(), .at = position_, .global_batch = global_batch()};
}

int64_t AllreduceStrategy::global_batch() const {
  return int64_t{c_.batch_size} * (config_.keep_global_batch ? planned_workers_ : size());
}

StrategyTraits AllreduceStrategy::traits(int batch_size) const {
  StrategyTraits traits{.description = describe(), .largest_batch = batch_size};
  if (config_.keep_global_batch) {
    const int64_t global = int64_t{batch_size} * planned_workers_;
    const int fewest = membership_->min_workers();
    traits.largest_batch = static_cast<int>((global + fewest - 1) / fewest);
  }
  return traits;
}

}  // namespace dtrain
