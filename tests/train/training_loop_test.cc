// The one training loop driven through a fake strategy, without a network: the order of the
// strategy's calls, the cadences of evaluation, the run log and checkpoints (also when the global
// step jumps, as an async ps worker sees it), the validation set that evaluations, the target and
// early stopping judge, and divergence.
#include "train/training_loop.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "base/error.h"
#include "ckpt/checkpoint_manager.h"
#include "ckpt/param_set_checkpoint.h"
#include "plan/recipes.h"
#include "plan/run_plan.h"
#include "support/plan_args.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "train/run_control.h"

namespace dtrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// MNIST-shaped examples whose class is decided by one pixel, so a few steps of softmax learn it.
Dataset separable_dataset(int64_t n, uint64_t seed) {
  Dataset d;
  d.size = n;
  d.example_size = 784;
  d.images.assign(static_cast<size_t>(n) * 784, 0.0f);
  d.labels.resize(static_cast<size_t>(n));
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    const auto label = static_cast<int32_t>(rng() % 10);
    d.labels[static_cast<size_t>(i)] = label;
    d.images[static_cast<size_t>(i * 784 + label * 7)] = 1.0f;
  }
  d.num_classes = 10;
  return d;
}

// Records every call; a step applies plain SGD itself and advances the global step by
// `step_stride` (an async ps worker sees the step jump by the other workers' pushes). Its compute
// is the loop's unless it sets one (own_compute).
class FakeStrategy final : public Strategy {
 public:
  explicit FakeStrategy(int step_stride = 1, int64_t finish_at = -1)
      : stride_(step_stride), finish_at_(finish_at) {}

  WorkerPlace place() const override { return place_; }
  StrategyTraits traits(int batch_size) const override {
    return {.description = "fake", .largest_batch = batch_size, .compute = own_compute};
  }
  int64_t start(TrainingState& state, const Restore& restore) override {
    calls.push_back("start");
    state.initialize(1);
    if (const auto step = restore()) state.step = *step;
    return state.step;
  }
  StepReport exchange_and_apply(TrainingState& state, const StepContext& context) override {
    learning_rates.push_back(context.lr);
    local_steps.push_back(context.local_step);
    if (!context.updated) state.apply(context.lr, state.step, 0, state.params().flat().size());
    state.step += stride_;
    return {};
  }
  bool finished() const override { return finish_at_ >= 0 && calls_to_step() >= finish_at_; }
  StopVerdict agree_to_stop(StopVerdict verdict) override {
    verdicts.push_back(verdict.stop);
    return verdict;
  }
  void before_checkpoint(TrainingState& state) override {
    calls.push_back("checkpoint@" + std::to_string(state.step));
  }
  void finish(TrainingState& state, bool reached_end) override {
    calls.push_back(std::string("finish@") + std::to_string(state.step) +
                    (reached_end ? " reached" : ""));
  }

  int64_t calls_to_step() const { return static_cast<int64_t>(local_steps.size()); }

  std::vector<std::string> calls;
  std::vector<float> learning_rates;
  std::vector<int64_t> local_steps;
  std::vector<bool> verdicts;
  StepCompute* own_compute = nullptr;
  WorkerPlace place_;

 private:
  int stride_;
  int64_t finish_at_;
};

class TrainingLoopTest : public ::testing::Test {
 protected:
  TrainingLoopTest()
      : train_(separable_dataset(1000, 1)),
        validation_(separable_dataset(100, 3)),
        test_(separable_dataset(200, 2)) {
    config_ = recipe_for("softmax");
    config_.moving_average_decay = 0;
    config_.eval_moving_average = false;
    config_.batch_size = 50;  // 20 batches an epoch
    config_.train_steps = 60;
    config_.log_every = 0;
    config_.train_dir = dir_.path();
  }

  // The metrics.jsonl records of evaluations, as (step, final): a validation accuracy during the
  // run, the test accuracy in the final one.
  std::vector<std::pair<int64_t, bool>> evaluations() const {
    std::vector<std::pair<int64_t, bool>> out;
    for (const auto& record : records()) {
      const bool final = record.value("final", false);
      if (record.contains(final ? "test_accuracy" : "validation/accuracy"))
        out.emplace_back(record["step"].get<int64_t>(), final);
    }
    return out;
  }

  std::vector<nlohmann::json> records() const {
    std::vector<nlohmann::json> out;
    std::ifstream in(dir_.path() / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }

  std::vector<int64_t> checkpoint_steps() const {
    std::vector<int64_t> steps;
    for (const auto& path : CheckpointManager(dir_.path(), 0).list())
      steps.push_back(*CheckpointManager::step_of(path.filename().string()));
    return steps;
  }

  TrainResult run(FakeStrategy& strategy) {
    TrainingState state(config_);
    return run(strategy, state);
  }
  TrainResult run(FakeStrategy& strategy, TrainingState& state) {
    const TrainingInput input(train_, validation_, test_);
    return run_training_loop(config_, input, state, strategy, log_);
  }

  testing::TempDir dir_;
  Dataset train_, validation_, test_;
  TrainConfig config_;
  std::ostringstream log_;
};

TEST_F(TrainingLoopTest, CallsTheStrategyInOrderAndCheckpointsAtItsCadence) {
  config_.save_steps = 25;
  config_.keep_checkpoints = 0;
  FakeStrategy strategy;
  const TrainResult result = run(strategy);
  EXPECT_EQ(result.global_step, 60);
  EXPECT_EQ(result.steps_run, 60);
  EXPECT_THAT(strategy.calls,
              ElementsAre("start", "checkpoint@25", "checkpoint@50", "finish@60 reached"));
  EXPECT_THAT(checkpoint_steps(), ElementsAre(25, 50, 60));
  ASSERT_EQ(strategy.local_steps.size(), 60u);
  EXPECT_EQ(strategy.local_steps.front(), 1);
  EXPECT_EQ(strategy.local_steps.back(), 60);
  EXPECT_GT(result.test_accuracy, 0.5) << log_.str();
}

TEST_F(TrainingLoopTest, TheScheduleDecaysPerEpochOfGlobalSteps) {
  config_.learning_rate = 0.5f;
  config_.lr_decay_rate = 0.5f;  // halves every epoch of 20 steps, staircase
  FakeStrategy strategy;
  run(strategy);
  EXPECT_FLOAT_EQ(strategy.learning_rates[0], 0.5f);
  EXPECT_FLOAT_EQ(strategy.learning_rates[19], 0.5f);
  EXPECT_FLOAT_EQ(strategy.learning_rates[20], 0.25f);
  EXPECT_FLOAT_EQ(strategy.learning_rates[40], 0.125f);
}

TEST_F(TrainingLoopTest, EvaluatesWhenTheGlobalStepCrossesEachMultipleEvenWhenItJumps) {
  config_.eval_every = 10;
  FakeStrategy strategy(/*step_stride=*/3);  // global steps 3, 6, 9, 12, ...
  run(strategy);
  // 12 crosses 10, 21 crosses 20, ... 60 ends the run: its record is the final one.
  EXPECT_THAT(evaluations(),
              ElementsAre(std::pair{12, false}, std::pair{21, false}, std::pair{30, false},
                          std::pair{42, false}, std::pair{51, false}, std::pair{60, false},
                          std::pair{60, true}));
  EXPECT_EQ(strategy.calls_to_step(), 20);
  EXPECT_TRUE(strategy.verdicts.empty()) << "no target: nothing to agree on";
}

TEST_F(TrainingLoopTest, StopsAtTheFirstEvaluationThatReachesTheTarget) {
  config_.eval_every = 5;
  config_.target_accuracy = 0.5;
  config_.train_steps = 1000;
  FakeStrategy strategy;
  const TrainResult result = run(strategy);
  ASSERT_TRUE(result.seconds_to_target.has_value()) << log_.str();
  EXPECT_LT(result.global_step, 1000);
  EXPECT_EQ(result.global_step % 5, 0);
  ASSERT_FALSE(strategy.verdicts.empty());
  EXPECT_TRUE(strategy.verdicts.back());
  EXPECT_EQ(std::count(strategy.verdicts.begin(), strategy.verdicts.end(), true), 1);
  EXPECT_EQ(strategy.calls.back(), "finish@" + std::to_string(result.global_step) + " reached");
  EXPECT_THAT(log_.str(), HasSubstr("target accuracy 0.5 reached at step " +
                                    std::to_string(result.global_step)));
}

TEST_F(TrainingLoopTest, ATargetWithoutEvalEveryIsCheckedFourTimesAnEpoch) {
  config_.target_accuracy = 0.5;
  // Never right on the validation set, which judges the target: never reached.
  for (int32_t& label : validation_.labels) label = (label + 1) % 10;
  FakeStrategy strategy;
  run(strategy);
  // 20 global steps an epoch: every 5.
  EXPECT_EQ(strategy.verdicts.size(), 12u);
  EXPECT_THAT(log_.str(), HasSubstr("target accuracy 0.5 not reached"));
}

TEST_F(TrainingLoopTest, EvaluationsJudgeTheValidationSetAndTheTestSetOnlyAtTheEnd) {
  config_.eval_every = 20;
  for (int32_t& label : validation_.labels) label = (label + 1) % 10;  // never right
  FakeStrategy strategy;
  const TrainResult result = run(strategy);
  std::vector<double> validation;
  for (const auto& record : records()) {
    if (record.value("final", false)) {
      EXPECT_FALSE(record.contains("validation/accuracy"));
      EXPECT_NEAR(record["test_accuracy"].get<double>(), result.test_accuracy, 1e-12);
    } else if (record.contains("validation/accuracy")) {
      EXPECT_FALSE(record.contains("test_accuracy"));
      EXPECT_GT(record["validation/loss"].get<double>(), 2.0) << "wrong labels: a high loss";
      validation.push_back(record["validation/accuracy"].get<double>());
    }
  }
  EXPECT_THAT(validation, ElementsAre(0.0, 0.0, 0.0));
  EXPECT_GT(result.test_accuracy, 0.5) << log_.str();
  EXPECT_THAT(log_.str(), HasSubstr("step 20, epoch 1.00, validation accuracy = 0.0000"));
}

TEST_F(TrainingLoopTest, EarlyStoppingStopsAfterPatienceEvaluationsAndTestsTheBestWeights) {
  config_.eval_every = 5;
  config_.early_stopping_patience = 2;
  config_.train_steps = 1000;
  // Labels the training pushes away from: the validation loss rises from the first evaluation on.
  for (int32_t& label : validation_.labels) label = (label + 1) % 10;
  FakeStrategy strategy;
  TrainingState state(config_);
  const TrainResult result = run(strategy, state);
  EXPECT_EQ(result.global_step, 15) << log_.str();
  EXPECT_THAT(strategy.verdicts, ElementsAre(false, false, true));
  EXPECT_FALSE(result.seconds_to_target.has_value()) << "stopped early, not at a target";
  EXPECT_EQ(strategy.calls.back(), "finish@15 reached");
  EXPECT_THAT(log_.str(), HasSubstr("early stopping at step 15: no lower validation loss in 2 "
                                    "evaluations"));
  EXPECT_THAT(log_.str(), HasSubstr("restored the weights of step 5"));

  // The best weights are in best/, the last in train_dir (to resume from), and the test set
  // judged the best.
  const auto best = CheckpointManager(dir_.path() / "best").restore_latest();
  ASSERT_TRUE(best.checkpoint.has_value());
  EXPECT_EQ(best.checkpoint->global_step, 5);
  EXPECT_THAT(checkpoint_steps(), ElementsAre(15));
  ParamSet best_params(state.params().specs());
  load_tensors(*best.checkpoint, best_params);
  EXPECT_TRUE(std::ranges::equal(state.params().flat(), best_params.flat()))
      << "the closing evaluation read the weights of step 5";
}

TEST_F(TrainingLoopTest, EvaluationWithoutAValidationSetIsRefusedNamingTheFlag) {
  config_.eval_every = 10;
  validation_ = Dataset{};
  FakeStrategy strategy;
  try {
    run(strategy);
    FAIL() << "the test set must not stand in for the validation set";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--eval_every"));
    EXPECT_THAT(e.what(), HasSubstr("--validation_size"));
  }
  EXPECT_TRUE(strategy.calls.empty());

  // The same, from the flags alone, before any data is read.
  TrainConfig c = recipe_for("softmax");
  c.validation_size = 0;
  c.target_accuracy = 0.9;
  EXPECT_THROW(
      {
        try {
          validate_train_config(c);
        } catch (const UsageError& e) {
          EXPECT_THAT(e.what(), HasSubstr("--target_accuracy 0.9"));
          EXPECT_THAT(e.what(), HasSubstr("--validation_size is 0"));
          throw;
        }
      },
      UsageError);
  c = recipe_for("softmax");
  c.early_stopping_patience = 3;
  EXPECT_THROW(validate_train_config(c), UsageError)
      << "patience counts --eval_every's evaluations";
}

TEST_F(TrainingLoopTest, StepLinesComeAtLeastOnceAnEpoch) {
  config_.log_every = 1000;  // beyond the run: an epoch is 20 steps
  config_.log_secs = 0;
  FakeStrategy strategy;
  run(strategy);
  EXPECT_EQ(testing::count_lines_containing(log_.str(), "examples/sec;"), 3) << log_.str();
  for (const char* step : {"step 20, loss = ", "step 40, loss = ", "step 60, loss = "})
    EXPECT_THAT(log_.str(), HasSubstr(step));
}

TEST_F(TrainingLoopTest, OnlyTheChiefDrawsTheProgressBarUnderEveryStrategy) {
  config_.progress_bar = true;
  for (const bool chief : {true, false}) {
    log_.str("");
    FakeStrategy strategy;
    strategy.place_ = {.rank = chief ? 0 : 1, .workers = 2, .chief = chief, .distributed = true};
    run(strategy);
    EXPECT_EQ(log_.str().find("ETA") != std::string::npos, chief) << log_.str();
  }
}

TEST_F(TrainingLoopTest, ARunWithoutTrainDirSaysOnceThatItSavesNothing) {
  config_.train_dir.clear();
  FakeStrategy strategy;
  run(strategy);
  EXPECT_EQ(testing::count_lines_containing(log_.str(), "nothing will be saved"), 1) << log_.str();
}

TEST_F(TrainingLoopTest, EndsWhenTheStrategySaysTheRunIsOver) {
  FakeStrategy strategy(1, /*finish_at=*/7);
  const TrainResult result = run(strategy);
  EXPECT_EQ(result.global_step, 7);
  EXPECT_EQ(strategy.calls.back(), "finish@7 reached");
}

// A strategy's own compute, whose loss is NaN: the loop, not the compute, judges it.
class NanLossCompute final : public StepCompute {
 public:
  float compute(TrainingState& /*state*/, const Batch& /*batch*/,
                StepContext& /*context*/) override {
    ++calls;
    return std::numeric_limits<float>::quiet_NaN();
  }
  int calls = 0;
};

TEST_F(TrainingLoopTest, ADivergedLossStopsTheRunNamingTheStepAndTheFlag) {
  FakeStrategy strategy;
  NanLossCompute compute;
  strategy.own_compute = &compute;
  try {
    run(strategy);
    FAIL() << "a NaN loss must end the run";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("at global step 1"));
    EXPECT_THAT(e.what(), HasSubstr("--learning_rate"));
  }
  EXPECT_EQ(compute.calls, 1);  // the strategy's compute ran, not the loop's
}

TEST_F(TrainingLoopTest, AResumedRunContinuesFromTheCheckpointsStep) {
  config_.train_steps = 30;
  FakeStrategy first;
  run(first);
  config_.train_steps = 50;
  FakeStrategy second;
  const TrainResult result = run(second);
  EXPECT_EQ(result.global_step, 50);
  EXPECT_EQ(result.steps_run, 20);
  EXPECT_THAT(log_.str(), HasSubstr("restored"));
}

TEST_F(TrainingLoopTest, DataOfAnotherWidthIsRefusedNamingBoth) {
  test_.example_size = 100;
  FakeStrategy strategy;
  try {
    run(strategy);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr("100 features"));
    EXPECT_THAT(e.what(), HasSubstr("model softmax takes 784"));
  }
  EXPECT_TRUE(strategy.calls.empty()) << "refused before anything started";
}

TEST_F(TrainingLoopTest, ALabelBeyondTheModelsOutputsIsRefusedBeforeItIsUsed) {
  train_.labels[0] = 12;    // the batcher's order decides when it comes; each batch is checked
  train_.num_classes = 10;  // as a stream would report: its labels are seen only as they come
  FakeStrategy strategy;
  config_.train_steps = 200;
  try {
    run(strategy);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr("label 12"));
    EXPECT_THAT(e.what(), HasSubstr("10 outputs"));
  }
}

// An owner (Python's fit, in a test's terms) that records every event and gives the orders it
// is told to at the ends of given epochs.
class RecordingOwner final : public RunOwner {
 public:
  explicit RecordingOwner(bool batches) : batches_(batches) {}
  bool wants_batches() const override { return batches_; }
  RunOrders on_event(const RunEvent& event, const RunWeights& weights) override {
    events.push_back(event);
    if (event.kind != RunEvent::Kind::kEpochEnd) return {};
    if (weigh_at_epoch == event.epoch) weights_step = weights().global_step;
    RunOrders orders;
    if (rate_at_epoch == event.epoch) orders.learning_rate = 0.125f;
    orders.stop = stop_at_epoch == event.epoch;
    return orders;
  }
  std::string kinds() const {
    static constexpr const char* kNames[] = {"train", "epoch", "batch", "/batch", "/epoch"};
    std::string text;
    for (const RunEvent& e : events)
      text += fmt::format("{}{} ", kNames[static_cast<int>(e.kind)], e.epoch);
    return text;
  }

  std::vector<RunEvent> events;
  int64_t rate_at_epoch = -1, stop_at_epoch = -1, weigh_at_epoch = -1;
  int64_t weights_step = -1;

 private:
  bool batches_;
};

TEST_F(TrainingLoopTest, AnOwnersRateAndStopTakeEffectAtTheNextStepAndItHearsEachEpoch) {
  RecordingOwner owner(/*batches=*/false);
  owner.rate_at_epoch = 0;  // from step 20 on
  owner.stop_at_epoch = 1;  // at step 40, before the third epoch
  owner.weigh_at_epoch = 1;
  RunControl control(owner, /*lockstep=*/true);
  config_.control = &control;
  FakeStrategy strategy;
  const TrainResult result = run(strategy);
  EXPECT_EQ(result.global_step, 40);
  EXPECT_EQ(strategy.calls.back(), "finish@40 reached");  // a stop ends the run as its last step
  ASSERT_EQ(strategy.learning_rates.size(), 40u);
  const float scheduled = strategy.learning_rates[0];
  EXPECT_NE(scheduled, 0.125f);
  EXPECT_EQ(strategy.learning_rates[19], scheduled);
  for (size_t i = 20; i < 40; ++i) EXPECT_EQ(strategy.learning_rates[i], 0.125f) << i;
  EXPECT_EQ(owner.kinds(), "train0 epoch0 /epoch0 epoch1 /epoch1 ");
  const RunEvent& end = owner.events[2];
  EXPECT_EQ(end.step, 20);
  ASSERT_EQ(end.logs.size(), 1u);
  EXPECT_EQ(end.logs[0].first, "loss");
  EXPECT_GT(end.examples_per_second, 0);
  EXPECT_EQ(owner.events[3].learning_rate, 0.125f);  // the rate the next epoch runs at
  EXPECT_EQ(owner.weights_step, 40);  // the weights the owner read were those of that boundary
}

TEST_F(TrainingLoopTest, BatchEventsCarryTheEpochsRunningLossAndTheEpochEndItsValidation) {
  RecordingOwner owner(/*batches=*/true);
  RunControl control(owner, /*lockstep=*/true);
  config_.control = &control;
  config_.train_steps = 20;
  config_.eval_each_epoch = true;
  FakeStrategy strategy;
  run(strategy);
  // train, epoch, then 20 begin/end pairs and the epoch's end.
  ASSERT_EQ(owner.events.size(), 2u + 40u + 1u) << owner.kinds();
  const RunEvent& first_end = owner.events[3];
  EXPECT_EQ(first_end.kind, RunEvent::Kind::kBatchEnd);
  EXPECT_EQ(first_end.batch, 0);
  const RunEvent& last_end = owner.events[41];
  EXPECT_EQ(last_end.batch, 19);
  const RunEvent& epoch_end = owner.events[42];
  ASSERT_EQ(epoch_end.kind, RunEvent::Kind::kEpochEnd);
  std::map<std::string, double> logs(epoch_end.logs.begin(), epoch_end.logs.end());
  EXPECT_EQ(logs.count("val_loss"), 1u);
  EXPECT_EQ(logs.count("val_accuracy"), 1u);
  // The last batch's running mean is the epoch's mean.
  EXPECT_DOUBLE_EQ(last_end.logs[0].second, logs["loss"]);
}

TEST_F(TrainingLoopTest, AWorkerThatIsNotTheChiefTakesTheChiefsOrdersAtTheirSteps) {
  RecordingOwner owner(/*batches=*/true);
  const auto posted = [](RunControl& control) {
    for (int64_t step = 0; step < 35; ++step)
      control.post(step,
                   {.learning_rate = step >= 20 ? std::optional<float>(0.25f) : std::nullopt});
    control.post(35, {.learning_rate = 0.25f, .stop = true});
  };
  const WorkerPlace follower{.rank = 1, .workers = 2, .chief = false, .distributed = true};
  config_.train_dir.clear();
  {
    // Lockstep (all-reduce, sync): each step at the chief's orders of that step.
    RunControl control(owner, /*lockstep=*/true);
    posted(control);
    config_.control = &control;
    FakeStrategy strategy;
    strategy.place_ = follower;
    const TrainResult result = run(strategy);
    EXPECT_EQ(result.global_step, 35);
    ASSERT_EQ(strategy.learning_rates.size(), 35u);
    EXPECT_NE(strategy.learning_rates[19], 0.25f);
    for (size_t i = 20; i < 35; ++i) EXPECT_EQ(strategy.learning_rates[i], 0.25f) << i;
  }
  {
    // Async: the latest orders, whatever the step.
    RunControl control(owner, /*lockstep=*/false);
    posted(control);
    config_.control = &control;
    FakeStrategy strategy;
    strategy.place_ = follower;
    EXPECT_EQ(run(strategy).global_step, 0);
  }
  EXPECT_TRUE(owner.events.empty());  // only the chief's loop tells the owner
}

TEST_F(TrainingLoopTest, EpochsBeyondWhatARunCountsAreRefusedNamingTheFlag) {
  config_.train_steps = 0;
  config_.epochs = 1e30;  // was a negative step count, and a run that trained nothing
  FakeStrategy strategy;
  try {
    run(strategy);
    FAIL() << "1e30 epochs must be refused";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--epochs 1e+30"));
  }
  EXPECT_TRUE(strategy.calls.empty());
}

// A BatchNormalization model after a few steps still evaluates on moving statistics near their
// start: the chief's closing lines say so, in the loop, so that every way of starting a run
// (the CLI, Python's fit) shows it; a worker that is not the chief says nothing of it.
TEST_F(TrainingLoopTest, TheChiefSaysAfterItsFiguresThatTheMovingStatisticsHaveNotSettled) {
  const std::filesystem::path model = dir_.path() / "bn.json";
  std::ofstream(model) << R"({"class_name": "Sequential", "config": {"layers": [
      {"class_name": "Dense", "config": {"units": 8, "batch_input_shape": [null, 784]}},
      {"class_name": "BatchNormalization", "config": {"momentum": 0.99}},
      {"class_name": "Dense", "config": {"units": 10, "activation": "softmax"}}]}})";
  config_.model = testing::plan_of({"--model", model.string()}).config.model;
  config_.train_steps = 5;
  FakeStrategy chief;
  run(chief);
  EXPECT_THAT(log_.str(), HasSubstr("warning: batch_norm"));
  EXPECT_THAT(log_.str(), HasSubstr("moving_variance"));
  EXPECT_LT(log_.str().find("test accuracy"), log_.str().find("warning: batch_norm"));

  log_.str("");
  FakeStrategy worker;
  worker.place_.chief = false;
  worker.place_.distributed = true;
  worker.place_.rank = 1;
  worker.place_.workers = 2;
  run(worker);
  EXPECT_THAT(log_.str(), Not(HasSubstr("warning:")));
}

}  // namespace
}  // namespace dtrain
