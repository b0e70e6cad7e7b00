// Reading what a training run left in its --train_dir, for tests that compare runs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>

#include "ckpt/checkpoint_manager.h"

namespace dtrain::testing {

inline Checkpoint newest_checkpoint(const std::filesystem::path& dir) {
  auto restored = CheckpointManager(dir).restore_latest();
  if (!restored.checkpoint) throw std::runtime_error("no checkpoint in " + dir.string());
  return std::move(*restored.checkpoint);
}

// The largest element-wise difference of tensor `name` between two checkpoints.
inline float max_abs_difference(const Checkpoint& a, const Checkpoint& b, const std::string& name) {
  const CheckpointTensor* x = a.find(name);
  const CheckpointTensor* y = b.find(name);
  if (x == nullptr || y == nullptr || x->values.size() != y->values.size())
    throw std::runtime_error("checkpoints disagree on tensor " + name);
  float most = 0;
  for (size_t i = 0; i < x->values.size(); ++i)
    most = std::max(most, std::abs(x->values[i] - y->values[i]));
  return most;
}

// A distributed run of softmax ("w", "b") on W slices of each global batch against the local run
// on the whole batch: equal up to rounding (kTolerance), while the control, the local run on one
// slice, ends elsewhere by far (so the tolerance can tell training on other batches apart).
inline void expect_same_training_as_the_combined_batch(const Checkpoint& distributed,
                                                       const Checkpoint& combined,
                                                       const Checkpoint& one_slice, int64_t steps) {
  constexpr float kTolerance = 1e-4f;
  EXPECT_EQ(distributed.global_step, steps);
  EXPECT_EQ(combined.global_step, steps);
  EXPECT_LE(max_abs_difference(distributed, combined, "w"), kTolerance);
  EXPECT_LE(max_abs_difference(distributed, combined, "b"), kTolerance);
  EXPECT_GT(max_abs_difference(distributed, one_slice, "w"), 10 * kTolerance);
}

}  // namespace dtrain::testing
