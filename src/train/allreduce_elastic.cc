// How an all-reduce worker follows an elastic job's membership (docs/elastic.md): over the ring of
// each view the job's coordinator settles (train/allreduce_ring.h), and when the ring fails or a
// change interrupts it, it drops the step under way and takes, with every other member, the state
// of the member furthest along. A step's update is applied only after all of its all-reduces have
// completed, so a member's state is always that of a whole step: the furthest member either applied
// the interrupted step exactly as the old membership computed it (its all-reduce had completed) or
// did not, and either way every member continues from the same state, never from half of one.
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <utility>

#include "base/error.h"
#include "train/allreduce_strategy.h"

namespace dtrain {

void AllreduceStrategy::join_view(TrainingState& state, bool have_state) {
  ring_.join(state.step, have_state, [&](const MembershipView& view, bool& has_state) {
    place_changed_ = true;
    int source = view.source;
    if (view.fresh) {
      source = 0;
      if (chief()) {
        state.initialize(c_.seed);
        if (const auto step = restore_()) state.step = *step;
        batches_.restart_at(state.step);
      }
    }
    // A member that takes another's state holds none of its own until the copy is whole.
    has_state = has_state && ring_.rank() == source;
    broadcast_state(ring_.communicator(), state, source, &batches_.position());
    has_state = true;
    ring_.membership().took_effect(state.step);
  });
  ring_.print_links(place().name_index());
}

void AllreduceStrategy::reform(TrainingState& state, const std::string& why) {
  fmt::print(out_, "{}: re-forming the ring at step {}: {}\n", name(), state.step, why);
  out_ << std::flush;
  join_view(state, /*have_state=*/true);
}

std::optional<DataSlice> AllreduceStrategy::data_slice() const {
  if (!elastic()) return std::nullopt;
  return batches_.slice(ring_.rank(), size());
}

StrategyTraits AllreduceStrategy::traits(int batch_size) const {
  return {.description = ring_.describe(),
          .largest_batch = config_.keep_global_batch
                               ? batches_.largest_slice(ring_.fewest_workers())
                               : batch_size};
}

}  // namespace dtrain
