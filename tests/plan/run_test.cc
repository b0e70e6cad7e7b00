// The composition root's refusals, in process: what one task of a cluster, a rank under a launcher
// and the local launcher refuse before anything connects, loads or starts. The environment is
// injected, so no test sets the process's own.
#include "plan/run.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "base/error.h"
#include "support/plan_args.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;

constexpr const char* kRunSecret = "0123456789abcdef0123456789abcdef";

// A ps task's cluster on ports nothing listens on: every case below must fail before connecting,
// and --peer_timeout 1 bounds the wait of one that does not.
std::vector<std::string> ps_task(std::vector<std::string> more) {
  std::vector<std::string> args = {
      "--job_name",     "worker",      "--task_index",   "0", "--ps_hosts", "localhost:1",
      "--worker_hosts", "localhost:2", "--peer_timeout", "1"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::string run_error(Command command, const std::vector<std::string>& args,
                      std::map<std::string, std::string, std::less<>> env = {
                          {"DTRAIN_SECRET", kRunSecret}}) {
  RunEnvironment environment;
  environment.env = env_of(std::move(env));
  std::ostringstream out;
  try {
    run_plan(plan_of(command, args), environment, out);
  } catch (const UsageError& e) {
    EXPECT_EQ(out.str(), "") << "nothing may start before the refusal";
    return e.what();
  }
  return "no error; printed: " + out.str();
}

TEST(RunPlanRoot, ATaskRefusesTheLocalLaunchersFlagsAndBadTimeoutsNamingTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--max_restarts", "2"}, "--max_restarts: this process is one task of the cluster"},
      {{"--workers", "3"}, "--workers: this process is one task"},
      {{"--ps", "2"}, "--ps: this process is one task"},
      {{"--liveness_timeout", "0"}, "--liveness_timeout 0: must be at least 1 second"},
      {{"--fusion_bytes", "8"}, "--fusion_bytes: means nothing under --strategy async"},
      {{"--overwrite", "--train_dir", "/nonexistent"}, "--overwrite: a task of a cluster"},
  };
  for (const auto& [flags, culprit] : cases)
    EXPECT_THAT(run_error(Command::kTask, ps_task(flags)), HasSubstr(culprit)) << flags[0];
}

TEST(RunPlanRoot, TheStrategyAndTheClusterMustAgree) {
  EXPECT_THAT(run_error(Command::kTask, ps_task({"--strategy", "allreduce"})),
              HasSubstr("--strategy allreduce: the cluster has 1 ps task"));
  EXPECT_THAT(run_error(Command::kTask, {"--strategy", "sync", "--job_name", "worker",
                                         "--worker_hosts", "localhost:2"}),
              HasSubstr("--strategy sync: the cluster has no ps tasks"));
  EXPECT_THAT(run_error(Command::kTask, ps_task({"--strategy", "local"})),
              HasSubstr("--strategy local: runs in one process; a cluster"));
  EXPECT_THAT(run_error(Command::kTrain, {"--strategy", "allreduce", "--ps", "1"}),
              HasSubstr("--ps 1: the allreduce strategy has no ps tasks"));
}

TEST(RunPlanRoot, ATaskNeedsAClusterAndATaskIndexInsideItsJob) {
  EXPECT_THAT(run_error(Command::kTask, {}), HasSubstr("dtrain task needs a cluster"));
  EXPECT_THAT(run_error(Command::kTask, {"--job_name", "worker", "--task_index", "5", "--ps_hosts",
                                         "localhost:1", "--worker_hosts", "localhost:2"}),
              HasSubstr("--task_index"));
}

TEST(RunPlanRoot, UnderALauncherALocalStrategyAMissingSecretAndAWorldOfOneAreRefused) {
  const std::map<std::string, std::string, std::less<>> torchrun = {{"RANK", "0"},
                                                                    {"WORLD_SIZE", "2"},
                                                                    {"MASTER_ADDR", "127.0.0.1"},
                                                                    {"DTRAIN_SECRET", kRunSecret}};
  EXPECT_THAT(run_error(Command::kTrain, {"--strategy", "local"}, torchrun),
              HasSubstr("--strategy local: trains in one process, but torchrun (RANK, "
                        "WORLD_SIZE) starts 2 of them"));
  auto without_secret = torchrun;
  without_secret["DTRAIN_SECRET"] = "";
  EXPECT_THAT(run_error(Command::kTrain, {"--peer_timeout", "1"}, without_secret),
              HasSubstr("export DTRAIN_SECRET=$(openssl rand -hex 32)"));
  EXPECT_THAT(run_error(Command::kTask, {}, {{"RANK", "0"}, {"WORLD_SIZE", "1"}}),
              HasSubstr("WORLD_SIZE=1: a cluster needs at least two tasks"));
  EXPECT_THAT(run_error(Command::kTrain, {"--strategy", "allreduce", "--ps", "1"}, torchrun),
              HasSubstr("--ps 1: the allreduce strategy has no ps tasks; leave --ps out"));
}

}  // namespace
}  // namespace dtrain::testing
