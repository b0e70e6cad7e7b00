// What a push to a parameter-server shard comes to (PushResult) and what a shard counts of them
// (ShardCounters), with the tests every push passes before it is counted: a finite gradient and a
// usable learning rate. The shard store (ps/shard_store.h) decides; these are its vocabulary.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace dtrain {

// The answer to a push. Every expected outcome is a value; only a broken request throws.
struct PushResult {
  enum class Outcome {
    kApplied,    // async: applied. sync: it was the R-th, so the step was applied and advanced
    kAccepted,   // sync: counted towards the current step, which advances when R have arrived
    kDuplicate,  // already handled (a retried sequence), or the worker's second gradient this step
    kStale,      // sync: not computed at the shard's current step: dropped and counted
    kRejected,   // the gradient holds a NaN or an infinity: dropped and counted, never applied
  };
  Outcome outcome;
  int64_t step;  // the shard's step after this push
};
std::string_view outcome_name(PushResult::Outcome outcome);

// One shard's state and history since the store was constructed.
struct ShardCounters {
  int64_t step = 0;           // the shard's step: its initial step plus the updates applied since
  int64_t applied = 0;        // optimizer updates (async: pushes; sync: completed steps)
  int64_t accepted = 0;       // sync: fresh gradients counted towards a step
  int64_t duplicates = 0;     // pushes acknowledged without effect
  int64_t stale_dropped = 0;  // sync: gradients computed at another step
  int64_t rejected = 0;       // gradients with a NaN or an infinity, dropped
};

// What a push's learning rate must be to be applied: finite and not negative. A push with another
// is rejected and counted as a non-finite gradient is: a NaN would poison every value it touches.
bool usable_learning_rate(float lr);

// Whether a pushed gradient holds only finite numbers.
bool finite_gradient(std::span<const float> grad);

}  // namespace dtrain
