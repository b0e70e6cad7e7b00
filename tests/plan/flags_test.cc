// The flag table (plan/flags.h) and the plan built through it (plan/run_plan.h), in process: the
// refusals of flags foreign to a strategy, the checks of values, and the defaults of the recipe.
#include "plan/flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "base/error.h"
#include "plan/run_plan.h"
#include "support/plan_args.h"
#include "support/temp_dir.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;

// The message of the UsageError that f throws; fails the test when it throws none.
template <typename F>
std::string usage_error_of(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no UsageError";
  return "";
}

std::string refusal_under(StrategyKind strategy, const std::vector<std::string>& args) {
  const RunPlan plan = plan_of(args);
  return usage_error_of([&] { refuse_flags_foreign_to(plan, strategy); });
}

TEST(FlagTable, EachRowThatHelpShowsHasOneOfItsTopicsAndHiddenOnesNone) {
  const std::span<const std::string_view> topics = help_topics();
  for (const FlagSpec& flag : flag_table()) {
    if (flag.hidden) {
      EXPECT_TRUE(flag.topic.empty()) << flag.name;
    } else {
      EXPECT_NE(std::find(topics.begin(), topics.end(), flag.topic), topics.end()) << flag.name;
    }
  }
  // Every heading heads something.
  for (const std::string_view topic : topics) {
    EXPECT_TRUE(std::any_of(flag_table().begin(), flag_table().end(), [&](const FlagSpec& flag) {
      return flag.topic == topic;
    })) << topic;
  }
}

TEST(FlagTable, EachFlagHasOneRowAndItsOwnField) {
  std::set<std::string_view> names;
  for (const FlagSpec& flag : flag_table()) {
    EXPECT_TRUE(flag.name.starts_with("--")) << flag.name;
    EXPECT_TRUE(names.insert(flag.name).second) << "twice: " << flag.name;
    EXPECT_EQ(flag.is_switch, std::holds_alternative<FieldOf<bool>>(flag.field)) << flag.name;
    EXPECT_TRUE(flag.hint.empty() == (flag.hint_under == 0)) << flag.name;
    EXPECT_EQ(flag.hint_under & flag.strategies, 0u) << flag.name << ": a hint where it applies";
  }
  EXPECT_EQ(names.count("--transport"), 1u);
  EXPECT_EQ(find_flag("--no_such_flag"), nullptr);
}

// Under which strategies each flag means something, as docs/strategies.md lists them.
TEST(FlagTable, AFlagForeignToTheStrategyIsRefusedNamingItTheStrategyAndWhereItApplies) {
  struct Case {
    std::vector<std::string> args;
    StrategyKind strategy;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--fusion_bytes", "1024"},
       StrategyKind::kLocal,
       "--fusion_bytes: means nothing under --strategy local; it applies to allreduce"},
      {{"--replicas_to_aggregate", "1"},
       StrategyKind::kTowers,
       "--replicas_to_aggregate: means nothing under --strategy towers; it applies to sync"},
      {{"--collective_timeout", "5"},
       StrategyKind::kAsync,
       "--collective_timeout: means nothing under --strategy async; it applies to allreduce"},
      {{"--fusion_bytes", "1024"},
       StrategyKind::kSync,
       "--fusion_bytes: means nothing under "
       "--strategy sync"},
      {{"--placement", "round_robin"},
       StrategyKind::kAllreduce,
       "--placement: means nothing under --strategy allreduce; it applies to async, sync"},
      {{"--transport", "shm"},
       StrategyKind::kLocal,
       "--transport: means nothing under --strategy local; it applies to async, sync, allreduce"},
      {{"--tcp_congestion", "reno"},
       StrategyKind::kLocal,
       "--tcp_congestion: means nothing under --strategy local; it applies to async, sync, "
       "allreduce"},
      {{"--workers", "2"},
       StrategyKind::kTowers,
       "--workers: means nothing under --strategy towers"},
      {{"--sync_replicas"},
       StrategyKind::kAllreduce,
       "--sync_replicas: means nothing under --strategy allreduce"},
      {{"--towers", "2"}, StrategyKind::kLocal, "--towers 2: needs --strategy towers"},
      {{"--ps", "2"},
       StrategyKind::kAllreduce,
       "--ps 2: the allreduce strategy has no ps tasks (the workers average their gradients "
       "among themselves); leave --ps out"},
      {{"--inject_nonfinite_at", "3"},
       StrategyKind::kTowers,
       "--inject_nonfinite_at: the towers strategy has nobody to refuse the gradient; use "
       "--strategy async, sync or allreduce"},
  };
  for (const Case& c : cases)
    EXPECT_THAT(refusal_under(c.strategy, c.args), HasSubstr(c.message)) << c.args[0];
}

TEST(FlagTable, AFlagOfTheStrategyOrOfEveryStrategyIsNotRefused) {
  const RunPlan plan = plan_of({"--fusion_bytes", "1024", "--eval_every", "10", "--workers", "3"});
  EXPECT_NO_THROW(refuse_flags_foreign_to(plan, StrategyKind::kAllreduce));
  const RunPlan ps = plan_of({"--liveness_timeout", "5", "--placement", "round_robin"});
  EXPECT_NO_THROW(refuse_flags_foreign_to(ps, StrategyKind::kAsync));
  // A task under a launcher: the rendezvous honours --peer_timeout whatever the strategy.
  const RunPlan launched = plan_of({"--peer_timeout", "5"});
  const std::string_view rendezvous[] = {"--peer_timeout"};
  EXPECT_NO_THROW(refuse_flags_foreign_to(launched, StrategyKind::kAllreduce, rendezvous));
  EXPECT_THROW(refuse_flags_foreign_to(launched, StrategyKind::kAllreduce), UsageError);
}

// Refused as the plan is made, before any task could start, under every strategy alike (what
// tests/train/shared_flags_test.cc ran once per strategy as a process).
TEST(FlagTable, ABadValueOfASharedFlagIsRefusedNamingFlagAndValueUnderEveryStrategy) {
  const std::vector<std::pair<std::string, std::string>> bad = {{"--learning_rate", "-1"},
                                                                {"--eval_every", "-5"},
                                                                {"--save_steps", "-1"},
                                                                {"--log_every", "-1"},
                                                                {"--moving_average_decay", "1.5"},
                                                                {"--target_accuracy", "2"},
                                                                {"--lr_decay_rate", "0"},
                                                                {"--save_secs", "-1"},
                                                                {"--validation_size", "-1"},
                                                                {"--step_delay_ms", "-1"},
                                                                {"--summary_steps", "-1"}};
  for (const StrategyKind strategy : strategy_kinds()) {
    for (const auto& [flag, value] : bad) {
      const std::string message = usage_error_of([&] {
        plan_of({"--model", "softmax", "--strategy", std::string(strategy_name(strategy)), flag,
                 value, "--train_steps", "10"});
      });
      EXPECT_THAT(message, HasSubstr(flag + " " + value)) << strategy_name(strategy);
    }
  }
}

// What tests/cli/train_cli_test.cc's BadFlagTest spawned a process for, one case each.
TEST(FlagTable, ABadValueIsRefusedWithALineNamingTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--batch_size", "0"}, "--batch_size 0: must be at least 1"},
      {{"--batch_size", "-5"}, "--batch_size -5"},
      {{"--model", "nope"}, "--model nope"},
      {{"--optimizer", "nope"}, "--optimizer nope: unknown; choose one of"},
      {{"--learning_rate", "-1"}, "--learning_rate -1: must be a positive number"},
      {{"--threads", "0"}, "--threads 0: must be at least 1"},
      {{"--epochs", "0"}, "--epochs 0: must be positive (or give --train_steps)"},
      {{"--hidden_units", "0", "--model", "mlp"}, "--hidden_units 0"},
      {{"--hidden_units", "50", "--model", "lenet"},
       "--hidden_units 50: --model lenet has no layer it sizes"},
      {{"--target_accuracy", "1.5"}, "--target_accuracy 1.5: must be in (0, 1]"},
      {{"--lr_schedule", "cosine", "--lr_decay_rate", "0.9"},
       "--lr_decay_rate 0.9: only the exponential schedule has a decay rate (--lr_schedule "
       "cosine)"},
      {{"--lr_schedule", "piecewise", "--lr_boundaries", "10", "--lr_values", "0.1"},
       "--lr_values 0.1: needs 2 rates, one more than the 1 of --lr_boundaries 10"},
      {{"--eval_every", "10", "--validation_size", "0"},
       "--eval_every 10: judges the validation examples"},
      {{"--towers", "0", "--strategy", "towers"}, "--towers 0: must be at least 1"},
      {{"--shutdown_timeout", "0.5"}, "--shutdown_timeout 0.5: must be at least 1 second"},
      {{"--resume", "--overwrite"}, "--resume and --overwrite: choose one"},
      {{"--inject_nonfinite_at", "0"}, "--inject_nonfinite_at 0: steps are counted from 1"},
      {{"--train_data", "a.csv"}, "--train_data is given without --test_data"},
      {{"--metrics_port", "70000"},
       "--metrics_port 70000: a TCP port (1..65535), 0 for a free one"},
      {{"--tcp_congestion", "no-such-algorithm", "--strategy", "allreduce"},
       "--tcp_congestion no-such-algorithm: this host does not offer TCP congestion control "
       "'no-such-algorithm' to dtrain"},
  };
  for (const auto& [args, culprit] : cases)
    EXPECT_THAT(usage_error_of([&] { plan_of(args); }), HasSubstr(culprit)) << args[0];
  EXPECT_THROW(plan_of({"--strategy", "magic"}), UsageError);
}

TEST(FlagTable, ClusterValuesAreCheckedUnderTheirStrategiesOnly) {
  const RunPlan plan =
      plan_of({"--fusion_bytes", "2", "--liveness_timeout", "0", "--collective_timeout", "0"});
  EXPECT_THAT(usage_error_of([&] {
                check_flags(plan, CheckWhen::kUnderItsStrategies, StrategyKind::kAllreduce);
              }),
              HasSubstr("--fusion_bytes 2: must be 0 (one buffer) or at least 4 (one float)"));
  EXPECT_THAT(usage_error_of(
                  [&] { check_flags(plan, CheckWhen::kUnderItsStrategies, StrategyKind::kSync); }),
              HasSubstr("--liveness_timeout 0: must be at least 1 second"));
  EXPECT_NO_THROW(check_flags(plan, CheckWhen::kUnderItsStrategies, StrategyKind::kLocal));
  EXPECT_THAT(usage_error_of([&] { check_flag(plan, "--collective_timeout"); }),
              HasSubstr("--collective_timeout 0: must be at least 1 second"));
}

TEST(FlagTable, TheLocalLaunchersValuesAreCheckedAgainstTheClusterItStarts) {
  auto launcher_error = [](StrategyKind strategy, const std::vector<std::string>& args) {
    const RunPlan plan = plan_of(args);
    return usage_error_of([&] {
      check_flags(plan, CheckWhen::kLocalLauncher, strategy);
      check_flags(plan, CheckWhen::kUnderItsStrategies, strategy, plan.flags.workers);
    });
  };
  // One error from the launcher, not one per task.
  EXPECT_EQ(launcher_error(StrategyKind::kAllreduce, {"--fusion_bytes", "2"}),
            "--fusion_bytes 2: must be 0 (one buffer) or at least 4 (one float)");
  EXPECT_THAT(launcher_error(StrategyKind::kAsync, {"--ps", "0"}),
              HasSubstr("--ps 0: need at least one ps task"));
  EXPECT_THAT(launcher_error(StrategyKind::kAllreduce, {"--workers", "0"}),
              HasSubstr("--workers 0: need at least one"));
  // Before, 100000 workers ran this machine out of memory or ports without a word.
  EXPECT_THAT(launcher_error(StrategyKind::kAllreduce, {"--workers", "100000"}),
              HasSubstr("--workers 100000: at most 1024 tasks start on this machine"));
  EXPECT_THAT(launcher_error(StrategyKind::kSync, {"--ps", "5000"}),
              HasSubstr("--ps 5000: at most 1024 tasks start on this machine"));
  const RunPlan most = plan_of({"--workers", "1024"});
  EXPECT_NO_THROW(check_flags(most, CheckWhen::kLocalLauncher, StrategyKind::kAllreduce));
  EXPECT_THAT(launcher_error(StrategyKind::kSync, {"--max_restarts", "-1"}),
              HasSubstr("--max_restarts -1: must not be negative"));
  EXPECT_THAT(launcher_error(StrategyKind::kAllreduce, {"--elastic_batch", "global"}),
              HasSubstr("--elastic_batch global: what an elastic job keeps at a change; give "
                        "--min_workers too"));
  EXPECT_THAT(launcher_error(StrategyKind::kAllreduce, {"--min_workers", "3", "--workers", "2"}),
              HasSubstr("--min_workers 3: must be between 1 and --workers (2)"));
  EXPECT_THAT(
      launcher_error(StrategyKind::kSync, {"--workers", "2", "--replicas_to_aggregate", "3"}),
      HasSubstr("--replicas_to_aggregate 3: must be in 1..2 (the workers)"));
  EXPECT_THAT(launcher_error(StrategyKind::kSync, {"--workers", "2", "--total_num_replicas", "3"}),
              HasSubstr("--total_num_replicas 3: the cluster has 2 training workers"));
  // In one task of a cluster the counts are checked against its cluster spec instead.
  const RunPlan task = plan_of({"--replicas_to_aggregate", "9"});
  EXPECT_NO_THROW(check_flags(task, CheckWhen::kUnderItsStrategies, StrategyKind::kSync));
}

// A default in seconds on the command line is the library's default in milliseconds.
TEST(FlagTable, EachDefaultIsTheLibrarysInTheFlagsUnit) {
  const FlagValues f;
  const PsClusterConfig ps;
  const AllreduceClusterConfig allreduce;
  EXPECT_EQ(f.peer_timeout * 1000, ps.peer_timeout_ms);
  EXPECT_EQ(f.worker_timeout * 1000, ps.worker_timeout_ms);
  EXPECT_EQ(f.liveness_timeout * 1000, ps.liveness_timeout_ms);
  EXPECT_EQ(f.collective_timeout * 1000, allreduce.collective_timeout_ms);
  EXPECT_EQ(f.shutdown_timeout * 1000, TrainConfig{}.shutdown_timeout_ms);
  EXPECT_EQ(f.min_shard_bytes, ps.min_shard_bytes);
  EXPECT_EQ(f.tcp_congestion, ps.cluster.tcp_congestion);
  const RunPlan plan = plan_of({"--model", "softmax"});
  EXPECT_EQ(plan.config.shutdown_timeout_ms, TrainConfig{}.shutdown_timeout_ms);
  EXPECT_EQ(plan.config.keep_checkpoints, TrainConfig{}.keep_checkpoints);
  EXPECT_EQ(plan.config.validation_size, 5000);
}

TEST(RunPlan, AFlagLeftOutTakesTheModelsRecipeAndAGivenOneWins) {
  const RunPlan recipe = plan_of({"--model", "softmax"});
  EXPECT_EQ(recipe.config.optimizer.name, "sgd");
  EXPECT_FLOAT_EQ(recipe.config.learning_rate, 0.5f);
  EXPECT_DOUBLE_EQ(recipe.config.epochs, 5);
  EXPECT_TRUE(recipe.config.eval_moving_average);
  const RunPlan given = plan_of({"--model", "softmax", "--learning_rate", "0.1", "--optimizer",
                                 "adam", "--moving_average_decay", "0", "--train_steps", "7"});
  EXPECT_FLOAT_EQ(given.config.learning_rate, 0.1f);
  EXPECT_EQ(given.config.optimizer.name, "adam");
  EXPECT_FALSE(given.config.eval_moving_average);
  EXPECT_EQ(given.config.train_steps, 7);
  const RunPlan lenet = plan_of({"--model", "lenet"});
  EXPECT_EQ(lenet.config.optimizer.name, "adam");
  EXPECT_DOUBLE_EQ(lenet.config.epochs, 4);
}

TEST(RunPlan, TheStrategyIsAnEnumAndTowersDefaultsToTwo) {
  const RunPlan towers = plan_of({"--strategy", "towers"});
  EXPECT_EQ(towers.strategy, StrategyKind::kTowers);
  EXPECT_EQ(towers.config.towers, 2);
  EXPECT_EQ(plan_of({"--strategy", "towers", "--towers", "3"}).config.towers, 3);
  EXPECT_EQ(plan_of({}).strategy, StrategyKind::kLocal);
  for (const StrategyKind kind : strategy_kinds())
    EXPECT_EQ(parse_strategy(strategy_name(kind)), kind);
}

TEST(RunPlan, UserFilesAreTrainedOnWholeUnlessAValidationSizeIsGiven) {
  EXPECT_EQ(plan_of({"--train_data", "a.csv", "--test_data", "b.csv"}).config.validation_size, 0);
  EXPECT_EQ(plan_of({"--train_data", "a.csv", "--test_data", "b.csv", "--validation_size", "10"})
                .config.validation_size,
            10);
}

TEST(RunPlan, ResumeModeFollowsTheFlags) {
  EXPECT_EQ(plan_of({}).resume, ResumeMode::kDefault);
  EXPECT_EQ(plan_of({"--resume"}).resume, ResumeMode::kResume);
  EXPECT_EQ(plan_of({"--overwrite"}).resume, ResumeMode::kOverwrite);
}

}  // namespace
}  // namespace dtrain::testing
