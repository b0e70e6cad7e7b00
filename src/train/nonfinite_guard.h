// The non-finite guard: one judge of whether a gradient holding a NaN or an infinity reaches the
// parameters, one count and one wording of its warning, for every strategy. The loop owns it
// (train/loop_step.h); a strategy asks it where its update would take the gradient — a ps worker
// before its push, since the ps tasks would apply it; all-reduce after the average, whose bits
// every rank shares, so that all decide alike without a word to each other.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "tensor/ops.h"

namespace dtrain {

class NonFiniteGuard {
 public:
  // `prefix` begins each warning ("worker=1: ").
  explicit NonFiniteGuard(std::string prefix) : prefix_(std::move(prefix)) {}

  // What a refused gradient's warning says: "<prefix><action>: <subject> holds a NaN or an
  // infinity (<n> so far); <consequence>".
  struct Refusal {
    std::string action;       // "skipped the update of step 12"
    std::string subject;      // "the averaged gradient"
    std::string consequence;  // "the parameters are unchanged"
  };

  // Whether every value of the gradient is finite. If not, counts the refusal and warns with
  // describe()'s words, which are made only then: a step that passes allocates nothing.
  template <class Describe>
  bool admits(std::span<const float> gradient, Describe describe) {
    if (all_finite(gradient)) return true;
    refuse(describe());
    return false;
  }

  // The gradients refused so far.
  int64_t refused() const { return refused_; }

 private:
  void refuse(const Refusal& refusal);

  std::string prefix_;
  int64_t refused_ = 0;
};

}  // namespace dtrain
