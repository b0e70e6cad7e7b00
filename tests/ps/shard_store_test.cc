// The ps shard store as a specification: async pushes apply at once and exactly once; sync pushes
// average R fresh gradients per step, drop stale ones and count them; optimizer slots per shard
// match Optimizer::apply on the whole arena; waits end at their deadline.
#include "ps/shard_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "base/error.h"

namespace dtrain {
namespace {

using Outcome = PushResult::Outcome;
using Clock = std::chrono::steady_clock;

// w (4x3) and b (3), both small: on one ps task, shard 0 is w and shard 1 is b.
std::vector<ParamSpec> small_specs() { return {ParamSpec{"w", {4, 3}}, ParamSpec{"b", {3}}}; }

PartitionMap one_ps_map(const std::vector<ParamSpec>& specs) {
  return make_partition(ParamSet(specs), 1, Placement::kBalanced);
}

SyncOptions sync_options(int workers, int replicas_to_aggregate) {
  return SyncOptions{.sync_replicas = true,
                     .total_num_replicas = workers,
                     .replicas_to_aggregate = replicas_to_aggregate};
}

std::vector<float> ramp(size_t n, float start, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

void initialize_all(ShardStore& store, float value, int64_t step = 0) {
  for (size_t shard : store.shards())
    store.initialize(shard, std::vector<float>(store.shard_size(shard), value), step);
}

std::vector<float> read(const ShardStore& store, size_t shard) {
  std::vector<float> out(store.shard_size(shard));
  store.read(shard, out);
  return out;
}

TEST(ShardStoreTest, AsyncPushAppliesSgdExactly) {
  const auto specs = small_specs();
  ShardStore store(specs, one_ps_map(specs), 0, {.name = "sgd"}, {.total_num_replicas = 1});
  const std::vector<float> values = ramp(12, 1.0f, 0.25f), grad = ramp(12, -0.5f, 0.125f);
  store.initialize(0, values, 0);
  const PushResult result = store.push_async(0, 0, 1, grad, 0.1f);
  EXPECT_EQ(result.outcome, Outcome::kApplied);
  EXPECT_EQ(result.step, 1);
  const std::vector<float> after = read(store, 0);
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(after[i], values[i] - 0.1f * grad[i]) << i;
  EXPECT_EQ(store.counters(0).applied, 1);
}

// A statistic (BatchNormalization's moving mean) is assigned its averaged delta, whatever the
// optimizer and the learning rate; the trainable shard beside it takes Adam.
TEST(ShardStoreTest, SyncStatisticShardTakesTheAverageDeltaAtNoLearningRate) {
  std::vector<ParamSpec> specs = small_specs();
  specs[1].trainable = false;
  const PartitionMap map = one_ps_map(specs);
  ShardStore store(specs, map, 0, {.name = "adam"}, sync_options(2, 2));
  initialize_all(store, 1.0f);
  size_t statistic = 0, weights = 0;
  for (size_t shard : store.shards()) (map.shards[shard].tensor == 1 ? statistic : weights) = shard;
  store.push_sync(statistic, 0, 1, 0, std::vector<float>{0.25f, 0.5f, -1.0f}, 0.1f);
  store.push_sync(statistic, 1, 1, 0, std::vector<float>{0.75f, 0.5f, 1.0f}, 0.1f);
  EXPECT_EQ(read(store, statistic), (std::vector<float>{0.5f, 0.5f, 1.0f}));
  store.push_sync(weights, 0, 1, 0, std::vector<float>(12, 0.5f), 0.1f);
  store.push_sync(weights, 1, 1, 0, std::vector<float>(12, 0.5f), 0.1f);
  // Adam's first step moves every value by lr·m/(sqrt(v) + ε) ≈ lr, whatever the gradient's size.
  for (const float v : read(store, weights)) EXPECT_NEAR(v, 0.9f, 1e-5);
}

TEST(ShardStoreTest, NonFiniteGradientsAreRejectedCountedAndNeverApplied) {
  const auto specs = small_specs();
  // Adam: a NaN that reached its slots would poison every later step too.
  ShardStore store(specs, one_ps_map(specs), 0, {.name = "adam"}, {.total_num_replicas = 2});
  initialize_all(store, 1.0f);
  const std::vector<float> before = read(store, 1);
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity()}) {
    const std::vector<float> grad = {0.5f, bad, 0.5f};
    const uint64_t sequence = store.next_sequence(1, 0);
    const PushResult result = store.push_async(1, 0, sequence, grad, 0.1f);
    EXPECT_EQ(result.outcome, Outcome::kRejected) << bad;
    EXPECT_EQ(result.step, 0);
    // Its sequence is spent: a retry is a duplicate, not a second rejection.
    EXPECT_EQ(store.push_async(1, 0, sequence, grad, 0.1f).outcome, Outcome::kDuplicate);
  }
  EXPECT_EQ(read(store, 1), before);
  std::vector<float> slot(3);
  store.read_slot(1, 0, slot);
  EXPECT_EQ(slot, std::vector<float>(3, 0.0f));
  EXPECT_EQ(store.counters(1).rejected, 3);
  EXPECT_EQ(store.counters(1).applied, 0);
  // The next finite gradient applies as usual.
  EXPECT_EQ(store.push_async(1, 1, 0, std::vector<float>(3, 1.0f), 0.1f).outcome,
            Outcome::kApplied);
  for (const float v : read(store, 1)) EXPECT_TRUE(std::isfinite(v));
}

TEST(ShardStoreTest, SyncNonFiniteGradientDoesNotCountTowardsTheStep) {
  const auto specs = small_specs();
  ShardStore store(specs, one_ps_map(specs), 0, {.name = "sgd"}, sync_options(2, 2));
  initialize_all(store, 1.0f);
  const std::vector<float> good(3, 1.0f);
  const std::vector<float> bad = {1.0f, std::numeric_limits<float>::quiet_NaN(), 1.0f};
  EXPECT_EQ(store.push_sync(1, 0, 0, 0, bad, 0.5f).outcome, Outcome::kRejected);
  // Worker 0 may still contribute to step 0 with its next batch: the rejected one took no place.
  EXPECT_EQ(store.push_sync(1, 1, 0, 0, good, 0.5f).outcome, Outcome::kAccepted);
  EXPECT_EQ(store.push_sync(1, 0, 1, 0, good, 0.5f).outcome, Outcome::kApplied);
  EXPECT_EQ(read(store, 1), std::vector<float>(3, 0.5f));
  EXPECT_EQ(store.counters(1).rejected, 1);
  EXPECT_EQ(store.counters(1).step, 1);
}

TEST(ShardStoreTest, AsyncDuplicateSequenceIsNotAppliedTwice) {
  const auto specs = small_specs();
  ShardStore store(specs, one_ps_map(specs), 0, {.name = "sgd"}, {.total_num_replicas = 2});
  initialize_all(store, 1.0f);
  const std::vector<float> grad(3, 1.0f);
  EXPECT_EQ(store.push_async(1, 0, 5, grad, 0.5f).outcome, Outcome::kApplied);
  const PushResult retry = store.push_async(1, 0, 5, grad, 0.5f);
  EXPECT_EQ(retry.outcome, Outcome::kDuplicate);
  EXPECT_EQ(retry.step, 1);
  EXPECT_EQ(store.push_async(1, 0, 3, grad, 0.5f).outcome, Outcome::kDuplicate);
  EXPECT_EQ(read(store, 1), std::vector<float>(3, 0.5f));
  // Sequences are per worker: worker 1's sequence 5 is new.
  EXPECT_EQ(store.push_async(1, 1, 5, grad, 0.5f).outcome, Outcome::kApplied);
  EXPECT_EQ(store.push_async(1, 0, 6, grad, 0.5f).outcome, Outcome::kApplied);
  const ShardCounters counters = store.counters(1);
  EXPECT_EQ(counters.applied, 3);
  EXPECT_EQ(counters.duplicates, 2);
  EXPECT_EQ(counters.step, 3);
}

TEST(ShardStoreTest, ASequenceFarBeyondTheNextExpectedIsRefusedInBothModes) {
  const auto specs = small_specs();
  const std::vector<float> grad(3, 1.0f);
  ShardStore async(specs, one_ps_map(specs), 0, {.name = "sgd"}, {.total_num_replicas = 2});
  initialize_all(async, 1.0f);
  // A store that has not heard from the worker (new, or restored from a checkpoint) takes its
  // numbering as it comes: the worker's rounds outlive the ps.
  EXPECT_EQ(async.push_async(1, 0, 5000, grad, 0.5f).outcome, Outcome::kApplied);
  EXPECT_EQ(async.push_async(1, 0, 5001 + kMaxSequenceAhead, grad, 0.5f).outcome,
            Outcome::kApplied);
  EXPECT_THROW(async.push_async(1, 0, 5002 + 2 * kMaxSequenceAhead + 1, grad, 0.5f), Error);
  // Not even a first push may come near wrapping the count.
  EXPECT_THROW(async.push_async(1, 1, kMaxSequence + 1, grad, 0.5f), Error);
  EXPECT_EQ(async.push_async(1, 1, kMaxSequence, grad, 0.5f).outcome, Outcome::kApplied);
  EXPECT_EQ(async.counters(1).applied, 3);
  EXPECT_EQ(read(async, 1), std::vector<float>(3, -0.5f));
  // The refused pushes spent nothing: the worker's next real round is not a duplicate.
  EXPECT_EQ(async.push_async(1, 0, 5002 + kMaxSequenceAhead, grad, 0.5f).outcome,
            Outcome::kApplied);

  ShardStore sync(specs, one_ps_map(specs), 0, {.name = "sgd"}, sync_options(2, 2));
  initialize_all(sync, 1.0f);
  EXPECT_EQ(sync.push_sync(1, 0, 7, 0, grad, 0.5f).outcome, Outcome::kAccepted);
  EXPECT_THROW(sync.push_sync(1, 0, 8 + kMaxSequenceAhead + 1, 0, grad, 0.5f), Error);
  EXPECT_EQ(sync.push_sync(1, 1, 0, 0, grad, 0.5f).outcome, Outcome::kApplied);
  EXPECT_EQ(sync.counters(1).step, 1);
}

TEST(ShardStoreTest, SyncWithTwoReplicasAveragesAndAppliesOnce) {
  const auto specs = small_specs();
  ShardStore store(specs, one_ps_map(specs), 0, {.name = "sgd"}, sync_options(2, 2));
  store.initialize(1, std::vector<float>{1.0f, 2.0f, 3.0f}, 0);
  const PushResult first = store.push_sync(1, 0, 1, 0, std::vector<float>{0.5f, 1.0f, -2.0f}, 0.1f);
  EXPECT_EQ(first.outcome, Outcome::kAccepted);
  EXPECT_EQ(first.step, 0);
  EXPECT_EQ(read(store, 1), (std::vector<float>{1.0f, 2.0f, 3.0f}));
  const PushResult second = store.push_sync(1, 1, 1, 0, std::vector<float>{1.5f, 3.0f, 4.0f}, 0.1f);
  EXPECT_EQ(second.outcome, Outcome::kApplied);
  EXPECT_EQ(second.step, 1);
  // Mean gradients (1, 2, 1): 1 - 0.1, 2 - 0.2, 3 - 0.1.
  const std::vector<float> after = read(store, 1);
  EXPECT_NEAR(after[0], 0.9, 1e-6);
  EXPECT_NEAR(after[1], 1.8, 1e-6);
  EXPECT_NEAR(after[2], 2.9, 1e-6);
  const ShardCounters counters = store.counters(1);
  EXPECT_EQ(counters.applied, 1);
  EXPECT_EQ(counters.accepted, 2);
}

TEST(ShardStoreTest, SyncStaleGradientIsDroppedAndCounted) {
  const auto specs = small_specs();
  ShardStore store(specs, one_ps_map(specs), 0, {.name = "sgd"}, sync_options(2, 2));
  initialize_all(store, 1.0f);
  const std::vector<float> grad(3, 1.0f);
  store.push_sync(1, 0, 1, 0, grad, 0.5f);
  store.push_sync(1, 1, 1, 0, grad, 0.5f);
  const std::vector<float> before = read(store, 1);
  const PushResult stale = store.push_sync(1, 0, 2, 0, grad, 0.5f);
  EXPECT_EQ(stale.outcome, Outcome::kStale);
  EXPECT_EQ(stale.step, 1);
  EXPECT_EQ(read(store, 1), before);
  EXPECT_EQ(store.counters(1).stale_dropped, 1);
  EXPECT_EQ(store.counters(1).accepted, 2);
}

TEST(ShardStoreTest, SyncSecondGradientFromSameWorkerInOneStepIsNotCounted) {
  const auto specs = small_specs();
  ShardStore store(specs, one_ps_map(specs), 0, {.name = "sgd"}, sync_options(2, 2));
  store.initialize(1, std::vector<float>(3, 0.0f), 0);
  EXPECT_EQ(store.push_sync(1, 0, 1, 0, std::vector<float>(3, 2.0f), 1.0f).outcome,
            Outcome::kAccepted);
  const PushResult again = store.push_sync(1, 0, 2, 0, std::vector<float>(3, 100.0f), 1.0f);
  EXPECT_EQ(again.outcome, Outcome::kDuplicate);
  EXPECT_EQ(again.step, 0);
  EXPECT_EQ(store.push_sync(1, 1, 1, 0, std::vector<float>(3, 4.0f), 1.0f).outcome,
            Outcome::kApplied);
  EXPECT_EQ(read(store, 1), std::vector<float>(3, -3.0f));  // -(2 + 4) / 2
  EXPECT_EQ(store.counters(1).duplicates, 1);
}

TEST(ShardStoreTest, SyncBackupWorkersLateGradientIsStale) {
  const auto specs = small_specs();
  ShardStore store(specs, one_ps_map(specs), 0, {.name = "sgd"}, sync_options(3, 2));
  initialize_all(store, 1.0f);
  const std::vector<float> grad(3, 1.0f);
  EXPECT_EQ(store.push_sync(1, 2, 1, 0, grad, 0.5f).outcome, Outcome::kAccepted);
  EXPECT_EQ(store.push_sync(1, 0, 1, 0, grad, 0.5f).outcome, Outcome::kApplied);
  EXPECT_EQ(store.push_sync(1, 1, 1, 0, grad, 0.5f).outcome, Outcome::kStale);
  EXPECT_EQ(read(store, 1), std::vector<float>(3, 0.5f));
  // The backup takes part in the next step like any other worker.
  EXPECT_EQ(store.push_sync(1, 1, 2, 1, grad, 0.5f).outcome, Outcome::kAccepted);
  EXPECT_EQ(store.counters(1).stale_dropped, 1);
}

// An elastic job's workers leave and join (ps/worker_roster.h): the gradients a step takes follow
// them, down to one and back up to the R the store was made with, never beyond it.
TEST(ShardStoreTest, SyncStepCountFollowsTheWorkersDownAndBackUp) {
  const auto specs = small_specs();
  ShardStore store(specs, one_ps_map(specs), 0, {.name = "sgd"}, sync_options(3, 3));
  store.initialize(1, std::vector<float>(3, 0.0f), 0);
  // Two of three gradients are in when the third worker leaves: the step is applied with the two.
  EXPECT_EQ(store.push_sync(1, 0, 1, 0, std::vector<float>(3, 2.0f), 1.0f).outcome,
            Outcome::kAccepted);
  EXPECT_EQ(store.push_sync(1, 1, 1, 0, std::vector<float>(3, 4.0f), 1.0f).outcome,
            Outcome::kAccepted);
  store.set_replicas(2);
  EXPECT_EQ(store.counters(1).step, 1);
  EXPECT_EQ(read(store, 1), std::vector<float>(3, -3.0f));  // -(2 + 4) / 2
  // It comes back: the next step waits for all three again.
  store.set_replicas(3);
  EXPECT_EQ(store.replicas_to_aggregate(), 3);
  EXPECT_EQ(store.push_sync(1, 0, 2, 1, std::vector<float>(3, 3.0f), 1.0f).outcome,
            Outcome::kAccepted);
  EXPECT_EQ(store.push_sync(1, 1, 2, 1, std::vector<float>(3, 3.0f), 1.0f).outcome,
            Outcome::kAccepted);
  EXPECT_EQ(store.push_sync(1, 2, 1, 1, std::vector<float>(3, 3.0f), 1.0f).outcome,
            Outcome::kApplied);
  EXPECT_EQ(read(store, 1), std::vector<float>(3, -6.0f));
  EXPECT_THAT([&] { store.set_replicas(4); }, ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
                                                  "cannot make a step take 4 gradients: 1..3")));
  EXPECT_THROW(store.set_replicas(0), Error);
  // What every reply carries of the workers is what the roster noted last.
  store.note_workers({.changes = 2, .left = 1, .workers = 3, .worker = 2, .joined = 1, .step = 1});
  EXPECT_EQ(store.workers().worker, 2);
  EXPECT_EQ(store.workers().changes, 2u);
}

TEST(ShardStoreTest, SyncRetryOfACountedPushIsADuplicateNotStale) {
  const auto specs = small_specs();
  ShardStore store(specs, one_ps_map(specs), 0, {.name = "sgd"}, sync_options(2, 2));
  initialize_all(store, 1.0f);
  const std::vector<float> grad(3, 1.0f);
  store.push_sync(1, 0, 7, 0, grad, 0.5f);
  store.push_sync(1, 1, 7, 0, grad, 0.5f);
  // Worker 0's acknowledgement was lost; its retry arrives after the step advanced.
  EXPECT_EQ(store.push_sync(1, 0, 7, 0, grad, 0.5f).outcome, Outcome::kDuplicate);
  EXPECT_EQ(store.counters(1).stale_dropped, 0);
}

// Pushes the same gradients through per-shard stores on 2 ps tasks and through Optimizer::apply
// on the whole arena; values and every slot must agree shard by shard.
void expect_stores_match_optimizer(const OptimizerConfig& config) {
  SCOPED_TRACE(config.name);
  const std::vector<ParamSpec> specs = {ParamSpec{"w", {40, 30}}, ParamSpec{"b", {30}}};
  ParamSet params(specs), grads(specs);
  const PartitionMap map = make_partition(params, 2, Placement::kBalanced, 1024);
  ASSERT_GT(map.shards.size(), 2u);  // w is split between the tasks
  auto reference = make_optimizer(config, specs);
  for (size_t i = 0; i < params.flat().size(); ++i)
    params.flat()[i] = 0.01f * static_cast<float>(i % 97);
  std::vector<std::unique_ptr<ShardStore>> stores;
  for (int ps = 0; ps < 2; ++ps) {
    stores.push_back(
        std::make_unique<ShardStore>(specs, map, ps, config, SyncOptions{.total_num_replicas = 1}));
  }
  for (size_t i = 0; i < map.shards.size(); ++i) {
    const Shard& shard = map.shards[i];
    stores[shard.ps]->initialize(i, params.flat().subspan(shard.begin, shard.size()), 0);
  }
  for (int64_t step = 0; step < 4; ++step) {
    for (size_t i = 0; i < grads.flat().size(); ++i)
      grads.flat()[i] = 0.1f * static_cast<float>((i * (step + 3)) % 13) - 0.6f;
    // The ps clips what it applies; the reference clips the whole gradient first.
    GradSet clipped(specs);
    clipped.copy_from(grads);
    reference->clip(clipped);
    reference->apply(params, clipped, 0.05f, step);
    for (size_t i = 0; i < map.shards.size(); ++i) {
      const Shard& shard = map.shards[i];
      const PushResult result =
          stores[shard.ps]->push_async(i, 0, static_cast<uint64_t>(step),
                                       grads.flat().subspan(shard.begin, shard.size()), 0.05f);
      ASSERT_EQ(result.outcome, Outcome::kApplied);
    }
  }
  for (size_t i = 0; i < map.shards.size(); ++i) {
    const Shard& shard = map.shards[i];
    const ShardStore& store = *stores[shard.ps];
    ASSERT_EQ(store.slot_suffixes().size(), reference->slots().size());
    std::vector<float> out(shard.size());
    EXPECT_EQ(store.read(i, out), 4);
    for (size_t j = 0; j < out.size(); ++j)
      ASSERT_FLOAT_EQ(out[j], params.flat()[shard.begin + j]) << "shard " << i << " value " << j;
    for (size_t k = 0; k < store.slot_suffixes().size(); ++k) {
      store.read_slot(i, k, out);
      for (size_t j = 0; j < out.size(); ++j) {
        ASSERT_FLOAT_EQ(out[j], reference->slots()[k].flat()[shard.begin + j])
            << store.slot_suffixes()[k] << " of shard " << i << " value " << j;
      }
    }
  }
}

TEST(ShardStoreTest, AdamAndMomentumSlotsArePerShardAndMatchOptimizerApply) {
  expect_stores_match_optimizer({.name = "momentum"});
  expect_stores_match_optimizer({.name = "adam"});
}

// Adagrad's accumulators start at initial_accumulator_value on the ps too, when the chief sends
// no slots; clipping by value and weight decay act on each push as on the whole arena.
TEST(ShardStoreTest, EveryOptimizerWithItsSlotsClippingAndDecayMatchesOptimizerApply) {
  for (const std::string& name : optimizer_names()) expect_stores_match_optimizer({.name = name});
  expect_stores_match_optimizer({.name = "rmsprop", .momentum = 0.5f, .centered = true});
  expect_stores_match_optimizer({.name = "sgd", .momentum = 0.9f, .use_nesterov = true});
  expect_stores_match_optimizer({.name = "adam", .weight_decay = 0.1f, .clipvalue = 0.2f});
}

// A norm needs the whole of what it measures, which a ps task does not hold.
TEST(ShardStoreTest, ClippingByANormOfMoreThanAShardIsRefusedNamingTheFlag) {
  const std::vector<ParamSpec> specs = {ParamSpec{"w", {40, 30}}, ParamSpec{"b", {30}}};
  const PartitionMap map = make_partition(ParamSet(specs), 2, Placement::kBalanced, 1024);
  const auto refusal = [&](const OptimizerConfig& config) -> std::string {
    try {
      ShardStore store(specs, map, 0, config, {.total_num_replicas = 1});
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_THAT(refusal({.name = "sgd", .global_clipnorm = 1.0f}),
              ::testing::StartsWith("--global_clipnorm 1: a ps task holds its own shards only"));
  EXPECT_THAT(refusal({.name = "sgd", .clipnorm = 1.0f}),
              ::testing::StartsWith("--clipnorm 1: variable w (4800 bytes) is cut into shards"));
  // Whole variables clip on the ps.
  const auto whole = small_specs();
  EXPECT_NO_THROW(ShardStore(whole, one_ps_map(whole), 0, {.name = "sgd", .clipnorm = 1.0f},
                             {.total_num_replicas = 1}));
}

TEST(ShardStoreTest, WaitStepPastReturnsOnTimeoutWithoutHanging) {
  const auto specs = small_specs();
  ShardStore store(specs, one_ps_map(specs), 0, {.name = "sgd"}, sync_options(2, 2));
  initialize_all(store, 0.0f);
  const auto start = Clock::now();
  EXPECT_EQ(store.wait_step_past(0, 0, start + std::chrono::milliseconds(50)), 0);
  const auto waited = Clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(50));
  EXPECT_LT(waited, std::chrono::seconds(5));
}

TEST(ShardStoreTest, WaitStepPastWakesWhenTheStepCompletes) {
  const auto specs = small_specs();
  ShardStore store(specs, one_ps_map(specs), 0, {.name = "sgd"}, sync_options(2, 2));
  initialize_all(store, 0.0f);
  int64_t seen = -1;
  {
    std::jthread waiter(
        [&] { seen = store.wait_step_past(1, 0, Clock::now() + std::chrono::seconds(30)); });
    store.push_sync(1, 0, 1, 0, std::vector<float>(3, 1.0f), 0.1f);
    store.push_sync(1, 1, 1, 0, std::vector<float>(3, 1.0f), 0.1f);
  }
  EXPECT_EQ(seen, 1);
}

TEST(ShardStoreTest, ConcurrentAsyncPushesAreAllApplied) {
  const auto specs = small_specs();
  constexpr int kWorkers = 4, kPushes = 500;
  ShardStore store(specs, one_ps_map(specs), 0, {.name = "sgd"}, {.total_num_replicas = kWorkers});
  initialize_all(store, 4.0f);
  {
    std::vector<std::jthread> workers;
    for (int w = 0; w < kWorkers; ++w) {
      workers.emplace_back([&store, w] {
        const std::vector<float> grad_w(12, 1.0f), grad_b(3, 1.0f);
        for (uint64_t seq = 0; seq < kPushes; ++seq) {
          store.push_async(0, w, seq, grad_w, 1.0f / 1024);
          store.push_async(1, w, seq, grad_b, 1.0f / 1024);
        }
      });
    }
  }
  for (size_t shard : {0u, 1u}) {
    const ShardCounters counters = store.counters(shard);
    EXPECT_EQ(counters.applied, kWorkers * kPushes);
    EXPECT_EQ(counters.step, kWorkers * kPushes);
    EXPECT_EQ(counters.duplicates, 0);
    // Multiples of 2^-10 add exactly in float32, so no update may be lost or torn.
    for (float v : read(store, shard)) EXPECT_EQ(v, 4.0f - kWorkers * kPushes / 1024.0f);
  }
}

TEST(ShardStoreTest, InitializeSetsStepAndSlotsAndReleasesWaiters) {
  const auto specs = small_specs();
  ShardStore store(specs, one_ps_map(specs), 0, {.name = "momentum"}, {.total_num_replicas = 1});
  EXPECT_FALSE(store.initialized());
  EXPECT_FALSE(store.wait_initialized(Clock::now() + std::chrono::milliseconds(10)));
  store.initialize(0, std::vector<float>(12, 1.0f), 42);
  EXPECT_FALSE(store.initialized());
  const std::vector<float> momentum = {0.5f, 0.5f, 0.5f};
  const std::vector<std::span<const float>> slots = {momentum};
  store.initialize(1, std::vector<float>(3, 1.0f), 42, slots);
  EXPECT_TRUE(store.wait_initialized(Clock::now()));
  std::vector<float> out(3);
  EXPECT_EQ(store.read(1, out), 42);
  store.read_slot(1, 0, out);
  EXPECT_EQ(out, momentum);
  // Momentum 0.9: accum = 0.9 * 0.5 + 1 = 1.45; value = 1 - 0.1 * 1.45.
  EXPECT_EQ(store.push_async(1, 0, 0, std::vector<float>(3, 1.0f), 0.1f).step, 43);
  store.read(1, out);
  EXPECT_NEAR(out[0], 0.855, 1e-6);
}

TEST(ShardStoreTest, BrokenRequestsThrowNamingTheCulprit) {
  const auto specs = small_specs();
  const PartitionMap two_ps = make_partition(ParamSet(specs), 2, Placement::kRoundRobin);
  ShardStore store(specs, two_ps, 0, {.name = "sgd"}, {.total_num_replicas = 2});
  ASSERT_EQ(store.shards(), std::vector<size_t>{0});
  const std::vector<float> grad(12, 1.0f);
  EXPECT_THROW(store.push_async(0, 0, 0, grad, 0.1f), Error);  // before initialisation
  initialize_all(store, 0.0f);
  EXPECT_THROW(store.push_async(1, 0, 0, std::vector<float>(3), 0.1f), Error);  // on ps 1
  EXPECT_THROW(store.push_async(0, 0, 0, std::vector<float>(5), 0.1f), Error);  // wrong size
  EXPECT_THROW(store.push_async(0, 2, 0, grad, 0.1f), Error);                   // no worker 2
  EXPECT_THROW(store.push_sync(0, 0, 0, 0, grad, 0.1f), Error);                 // async store
  EXPECT_EQ(store.counters(0).applied, 0);
}

TEST(ShardStoreTest, ReplicasToAggregateAboveWorkersIsAUsageError) {
  const auto specs = small_specs();
  EXPECT_THROW(ShardStore(specs, one_ps_map(specs), 0, {}, sync_options(2, 3)), UsageError);
  EXPECT_THROW(ShardStore(specs, one_ps_map(specs), 1, {}, {.total_num_replicas = 1}), UsageError);
  EXPECT_THROW(
      ShardStore(specs, one_ps_map(specs), 0, {.name = "adadelta"}, {.total_num_replicas = 1}),
      UsageError);
}

}  // namespace
}  // namespace dtrain
