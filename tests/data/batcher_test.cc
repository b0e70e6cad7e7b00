// Batcher: each epoch a permutation of the shard, reproducible from (seed, epoch), resumable with
// seek, sharded without overlap, and running on buffers allocated once.
#include "data/batcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <vector>

#include "base/error.h"

namespace dtrain {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

constexpr int64_t kExampleSize = 3;

// Example i has pixels (i, i + 0.5, -i) and label i % 10, so a batch row identifies its example.
Dataset numbered_dataset(int64_t size) {
  Dataset data;
  data.size = size;
  data.example_size = kExampleSize;
  data.images.resize(size * kExampleSize);
  data.labels.resize(size);
  for (int64_t i = 0; i < size; ++i) {
    data.images[i * kExampleSize] = static_cast<float>(i);
    data.images[i * kExampleSize + 1] = static_cast<float>(i) + 0.5f;
    data.images[i * kExampleSize + 2] = -static_cast<float>(i);
    data.labels[i] = static_cast<int32_t>(i % 10);
  }
  return data;
}

// The example ids of one batch, checking on the way that each row is intact and matches its label.
std::vector<int64_t> ids(const Batch& batch) {
  std::vector<int64_t> result;
  for (int b = 0; b < batch.size; ++b) {
    const float* row = batch.images + b * kExampleSize;
    const auto id = static_cast<int64_t>(row[0]);
    EXPECT_EQ(row[1], row[0] + 0.5f);
    EXPECT_EQ(row[2], -row[0]);
    EXPECT_EQ(batch.labels[b], id % 10);
    result.push_back(id);
  }
  return result;
}

// The ids of the next `steps` batches, concatenated.
std::vector<int64_t> take(Batcher& batcher, int64_t steps) {
  std::vector<int64_t> result;
  for (int64_t s = 0; s < steps; ++s) {
    const std::vector<int64_t> batch = ids(batcher.next());
    result.insert(result.end(), batch.begin(), batch.end());
  }
  return result;
}

std::vector<int64_t> sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<int64_t> range(int64_t begin, int64_t end, int64_t stride = 1) {
  std::vector<int64_t> v;
  for (int64_t i = begin; i < end; i += stride) v.push_back(i);
  return v;
}

TEST(Batcher, EveryExampleAppearsExactlyOncePerEpoch) {
  const Dataset data = numbered_dataset(100);
  Batcher batcher(data, 10, /*seed=*/7);
  ASSERT_EQ(batcher.steps_per_epoch(), 10);

  for (int epoch = 0; epoch < 3; ++epoch) {
    EXPECT_EQ(batcher.epoch(), epoch);
    EXPECT_EQ(sorted(take(batcher, 10)), range(0, 100)) << "epoch " << epoch;
  }
}

TEST(Batcher, RemainderIsDroppedAndEachEpochDrawsAFreshSubset) {
  const Dataset data = numbered_dataset(103);
  Batcher batcher(data, 10, /*seed=*/7);
  EXPECT_EQ(batcher.steps_per_epoch(), 10);

  const std::vector<int64_t> epoch0 = take(batcher, 10);
  EXPECT_EQ(batcher.epoch(), 1);
  const std::vector<int64_t> epoch1 = take(batcher, 10);

  EXPECT_EQ(std::set<int64_t>(epoch0.begin(), epoch0.end()).size(), 100u);
  EXPECT_EQ(std::set<int64_t>(epoch1.begin(), epoch1.end()).size(), 100u);
  EXPECT_NE(sorted(epoch0), sorted(epoch1)) << "the 3 dropped examples should differ by epoch";
}

TEST(Batcher, OrderDiffersBetweenEpochs) {
  const Dataset data = numbered_dataset(64);
  Batcher batcher(data, 8, /*seed=*/1);

  const std::vector<int64_t> epoch0 = take(batcher, 8);
  const std::vector<int64_t> epoch1 = take(batcher, 8);

  EXPECT_NE(epoch0, epoch1);
  EXPECT_NE(epoch0, range(0, 64)) << "the first epoch is shuffled too";
}

TEST(Batcher, EqualSeedsGiveEqualOrdersAndDifferentSeedsDifferentOnes) {
  const Dataset data = numbered_dataset(64);
  Batcher a(data, 8, /*seed=*/42);
  Batcher b(data, 8, /*seed=*/42);
  Batcher c(data, 8, /*seed=*/43);

  const std::vector<int64_t> from_a = take(a, 24);
  EXPECT_EQ(from_a, take(b, 24));
  EXPECT_NE(from_a, take(c, 24));
}

// Pins the shuffle itself: a changed draw would silently change every run's data order and break
// resuming a run trained by an earlier build. Update only on purpose.
TEST(Batcher, ShuffleForSeedZeroIsPinned) {
  const Dataset data = numbered_dataset(10);
  Batcher batcher(data, 10, /*seed=*/0);

  EXPECT_THAT(take(batcher, 1),
              ElementsAreArray(std::vector<int64_t>{6, 1, 2, 4, 7, 5, 3, 0, 9, 8}));
}

TEST(Batcher, WithoutShuffleEveryEpochTakesTheExamplesInTheirOrder) {
  const Dataset data = numbered_dataset(23);
  Batcher batcher(data, 5, /*seed=*/7, 0, 1, Sharding::kStrided, /*shuffle=*/false);
  for (int epoch = 0; epoch < 2; ++epoch) EXPECT_EQ(take(batcher, 4), range(0, 20)) << epoch;
  // Batch slices of two workers: worker 1 takes the second half of each global batch of 10.
  Batcher slices(data, 5, /*seed=*/7, 1, 2, Sharding::kBatchSlices, /*shuffle=*/false);
  EXPECT_EQ(take(slices, 2), (std::vector<int64_t>{5, 6, 7, 8, 9, 15, 16, 17, 18, 19}));
}

// Keras's sample_weight: each example's weight travels with it, whatever the order.
TEST(Batcher, EachExamplesWeightTravelsWithItThroughShufflesSlicesAndReslices) {
  Dataset data = numbered_dataset(40);
  for (int64_t i = 0; i < data.size; ++i) data.weights.push_back(0.5f + static_cast<float>(i));
  const auto weights_match = [](const Batch& batch) {
    ASSERT_NE(batch.weights, nullptr);
    for (int b = 0; b < batch.size; ++b)
      EXPECT_EQ(batch.weights[b], 0.5f + batch.images[b * kExampleSize]) << b;
  };
  Batcher batcher(data, 8, /*seed=*/3);
  for (int step = 0; step < 12; ++step) weights_match(batcher.next());
  Batcher slices(data, 4, /*seed=*/3, 1, 2, Sharding::kBatchSlices);
  weights_match(slices.next());
  slices.reslice(0, 3, {0, 0}, 12);  // a larger slice than the buffers held
  weights_match(slices.next());
  const Dataset unweighted = numbered_dataset(40);
  EXPECT_EQ(Batcher(unweighted, 8, 3).next().weights, nullptr);
}

TEST(Batcher, WeightsForAnotherNumberOfExamplesAreALogicError) {
  Dataset data = numbered_dataset(10);
  data.weights.assign(9, 1.0f);
  EXPECT_THROW(Batcher(data, 5, 1), std::logic_error);
}

TEST(Batcher, SeekThenNextEqualsTheSameStepOfAFreshBatcher) {
  const Dataset data = numbered_dataset(50);
  Batcher fresh(data, 7, /*seed=*/3);  // 7 steps per epoch, 1 example dropped
  std::vector<std::vector<int64_t>> expected;
  for (int s = 0; s < 31; ++s) expected.push_back(ids(fresh.next()));

  // Every step, including the first and last of an epoch and across boundaries (7, 14, 21, 28),
  // and the step after it, which must follow on as in an unbroken run.
  for (int s = 0; s < 30; ++s) {
    Batcher resumed(data, 7, /*seed=*/3);
    resumed.seek(s);
    EXPECT_EQ(resumed.epoch(), s / 7) << "step " << s;
    EXPECT_EQ(ids(resumed.next()), expected[s]) << "step " << s;
    EXPECT_EQ(ids(resumed.next()), expected[s + 1]) << "step " << s + 1;
  }
}

TEST(Batcher, SeekBackwardsAndForwardsOnOneBatcher) {
  const Dataset data = numbered_dataset(40);
  Batcher fresh(data, 5, /*seed=*/9);
  std::vector<std::vector<int64_t>> expected;
  for (int s = 0; s < 40; ++s) expected.push_back(ids(fresh.next()));

  Batcher batcher(data, 5, /*seed=*/9);
  for (int s : {33, 2, 8, 7, 39, 0, 16}) {
    batcher.seek(s);
    EXPECT_EQ(ids(batcher.next()), expected[s]) << "step " << s;
  }
}

TEST(Batcher, ShardsAreStridedDisjointAndCoverTheData) {
  const Dataset data = numbered_dataset(103);
  constexpr int kShards = 4;
  std::vector<int64_t> all;
  for (int shard = 0; shard < kShards; ++shard) {
    Batcher batcher(data, 1, /*seed=*/5, shard, kShards);
    ASSERT_EQ(batcher.shard_size(), shard < 3 ? 26 : 25);
    const std::vector<int64_t> epoch = take(batcher, batcher.steps_per_epoch());
    EXPECT_EQ(sorted(epoch), range(shard, 103, kShards)) << "shard " << shard;
    all.insert(all.end(), epoch.begin(), epoch.end());
  }
  EXPECT_EQ(sorted(all), range(0, 103));
}

TEST(Batcher, BuffersAreAllocatedOnceAndReusedAcrossEpochsAndSeeks) {
  const Dataset data = numbered_dataset(30);
  Batcher batcher(data, 4, /*seed=*/1);
  const Batch& first = batcher.next();
  const float* images = first.images;
  const int32_t* labels = first.labels;

  for (int s = 0; s < 50; ++s) {
    const Batch& batch = batcher.next();
    ASSERT_EQ(&batch, &first);
    ASSERT_EQ(batch.images, images);
    ASSERT_EQ(batch.labels, labels);
    ASSERT_EQ(batch.size, 4);
  }
  batcher.seek(1000);
  EXPECT_EQ(batcher.next().images, images);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(images) % 64, 0u);
}

TEST(Batcher, BatchSizeBelowOneIsAUsageErrorNamingTheValue) {
  const Dataset data = numbered_dataset(10);
  EXPECT_THAT([&] { Batcher(data, 0, 1); },
              ThrowsMessage<UsageError>(HasSubstr("--batch_size 0: must be at least 1")));
}

TEST(Batcher, BatchSizeLargerThanTheShardIsAUsageErrorNamingBoth) {
  const Dataset data = numbered_dataset(10);
  EXPECT_THAT([&] { Batcher(data, 5, 1, 0, 3); },
              ThrowsMessage<UsageError>(HasSubstr(
                  "--batch_size 5: larger than this worker's shard of 4 examples (10 examples in 3 "
                  "shards)")));
  EXPECT_THAT(
      [&] { Batcher(data, 4, 1, 2, 3); },
      ThrowsMessage<UsageError>(HasSubstr("--batch_size 4: larger than this worker's shard of 3")));
}

TEST(Batcher, ShardIndexOutOfRangeIsAUsageErrorNamingTheValue) {
  const Dataset data = numbered_dataset(10);
  EXPECT_THAT([&] { Batcher(data, 1, 1, 3, 3); },
              ThrowsMessage<UsageError>(HasSubstr("shard_index 3: must be in 0..2 for 3 shards")));
  EXPECT_THAT([&] { Batcher(data, 1, 1, -1, 3); },
              ThrowsMessage<UsageError>(HasSubstr("shard_index -1: must be in 0..2")));
}

TEST(Batcher, ShardCountBelowOneIsAUsageErrorNamingTheValue) {
  const Dataset data = numbered_dataset(10);
  EXPECT_THAT([&] { Batcher(data, 1, 1, 0, 0); },
              ThrowsMessage<UsageError>(HasSubstr("shard_count 0: must be at least 1")));
}

TEST(Batcher, NegativeSeekIsAUsageError) {
  const Dataset data = numbered_dataset(10);
  Batcher batcher(data, 2, 1);
  EXPECT_THAT([&] { batcher.seek(-1); },
              ThrowsMessage<UsageError>(HasSubstr("seek to step -1: must be at least 0")));
}

// ---- slices that follow an elastic job's membership (BatchSource::reslice) ----

// The ids of one global step of `count` workers from `at`, each worker's Batcher resliced as the
// training loop reslices it; `at` moves on as the strategy moves it.
std::vector<int64_t> elastic_step(std::vector<std::unique_ptr<Batcher>>& workers, int count,
                                  DataPosition& at, int64_t examples) {
  std::vector<int64_t> step;
  for (int k = 0; k < count; ++k) {
    workers[static_cast<size_t>(k)]->reslice(k, count, at, int64_t{count} * 7);
    const std::vector<int64_t> batch = ids(workers[static_cast<size_t>(k)]->next());
    step.insert(step.end(), batch.begin(), batch.end());
  }
  at = after_batch(at, int64_t{count} * 7, examples);
  return step;
}

TEST(Batcher, SlicesThatFollowAChangingMembershipTakeEachExampleOncePerEpoch) {
  const int64_t examples = 1000;
  const Dataset data = numbered_dataset(examples);
  std::vector<std::unique_ptr<Batcher>> workers;
  for (int k = 0; k < 5; ++k)
    workers.push_back(std::make_unique<Batcher>(data, 7, 42, 0, 1, Sharding::kBatchSlices));
  // Workers leave and join between steps: 3, then 2, then 5, then 4, over several epochs.
  const int counts[] = {3, 2, 5, 4};
  DataPosition at;
  std::map<int64_t, std::vector<int64_t>> seen;  // epoch -> ids
  std::map<int64_t, int> first_count;            // epoch -> workers at its first step
  for (int step = 0; step < 400; ++step) {
    const int count = counts[(step / 37) % 4];
    const int64_t epoch = batch_start(at, int64_t{count} * 7, examples).epoch;
    const std::vector<int64_t> taken = elastic_step(workers, count, at, examples);
    seen[epoch].insert(seen[epoch].end(), taken.begin(), taken.end());
    first_count.try_emplace(epoch, count);
  }
  ASSERT_GE(seen.size(), 4u);
  for (const auto& [epoch, taken] : seen) {
    const std::set<int64_t> distinct(taken.begin(), taken.end());
    EXPECT_EQ(distinct.size(), taken.size()) << "an example twice in epoch " << epoch;
    if (epoch == seen.rbegin()->first) continue;  // still under way
    // Only a tail too short for the global batch of the step that found it is dropped.
    EXPECT_LT(examples - static_cast<int64_t>(taken.size()), int64_t{first_count[epoch + 1]} * 7)
        << "epoch " << epoch;
  }
}

TEST(Batcher, SlicesOfAnUnchangingMembershipAreTheBatchSlicesOfAFixedCluster) {
  const int64_t examples = 300;
  const Dataset data = numbered_dataset(examples);
  std::vector<std::unique_ptr<Batcher>> elastic;
  std::vector<std::unique_ptr<Batcher>> fixed;
  for (int k = 0; k < 3; ++k) {
    elastic.push_back(std::make_unique<Batcher>(data, 7, 5, 0, 1, Sharding::kBatchSlices));
    fixed.push_back(std::make_unique<Batcher>(data, 7, 5, k, 3, Sharding::kBatchSlices));
  }
  DataPosition at;
  for (int step = 0; step < 40; ++step) {  // about three epochs
    std::vector<int64_t> expected;
    for (auto& worker : fixed) {
      const std::vector<int64_t> batch = ids(worker->next());
      expected.insert(expected.end(), batch.begin(), batch.end());
    }
    EXPECT_EQ(elastic_step(elastic, 3, at, examples), expected) << "step " << step;
  }
}

TEST(Batcher, ResliceRefusesSlicesTheDataCannotHold) {
  const Dataset data = numbered_dataset(20);
  Batcher batcher(data, 7, 1, 0, 1, Sharding::kBatchSlices);
  EXPECT_THAT([&] { batcher.reslice(0, 3, {}, 21); },
              ThrowsMessage<UsageError>(HasSubstr("21 examples (3 workers): more than the 20")));
  EXPECT_THAT([&] { batcher.reslice(2, 2, {}, 14); },
              ThrowsMessage<UsageError>(HasSubstr("slice 2 of 2")));
  EXPECT_THAT([&] { batcher.reslice(0, 3, {}, 2); },
              ThrowsMessage<UsageError>(HasSubstr("leaves some of 3 workers none")));
}

// --elastic_batch global: the global batch keeps its size over any number of workers, their
// slices differ by at most one example, and together they are the batch one worker would take.
TEST(Batcher, AKeptGlobalBatchIsSplitUnevenlyOverAnyNumberOfWorkers) {
  const int64_t examples = 500;
  const Dataset data = numbered_dataset(examples);
  Batcher alone(data, 20, 9, 0, 1, Sharding::kBatchSlices);
  std::vector<std::unique_ptr<Batcher>> workers;
  for (int k = 0; k < 6; ++k)
    workers.push_back(std::make_unique<Batcher>(data, 5, 9, 0, 1, Sharding::kBatchSlices));
  const int counts[] = {4, 3, 6, 1, 5};
  DataPosition at;
  for (int step = 0; step < 60; ++step) {  // over two epochs
    const int count = counts[step % 5];
    std::vector<int64_t> together;
    std::set<int> sizes;
    for (int k = 0; k < count; ++k) {
      auto& worker = *workers[static_cast<size_t>(k)];
      worker.reslice(k, count, at, 20);
      const Batch& batch = worker.next();
      sizes.insert(batch.size);
      const std::vector<int64_t> slice = ids(batch);
      together.insert(together.end(), slice.begin(), slice.end());
    }
    at = after_batch(at, 20, examples);
    EXPECT_EQ(together, ids(alone.next())) << "step " << step << ", " << count << " workers";
    EXPECT_LE(*sizes.rbegin() - *sizes.begin(), 1) << "step " << step;
  }
}

}  // namespace
}  // namespace dtrain
