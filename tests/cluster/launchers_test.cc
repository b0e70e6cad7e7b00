// `dtrain task` under launchers that give ranks, not addresses: torchrun-style variables on
// processes the test starts, and Open MPI's real mpirun. The ranks meet at the rendezvous and
// train to the accuracy a local cluster reaches; all-reduce ranks end with equal parameters.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cluster/local_launcher.h"
#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/slurm_cluster.h"
#include "support/text_match.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::string_view kLauncherSecret = "launcher test secret, of 32 bytes";

std::vector<std::string> task_flags() {
  return {"task",      "--model", "softmax",    "--epochs",           "1",
          "--threads", "1",       "--data_dir", mnist_dir().string(), "--log_every",
          "0"};
}

// Every "test accuracy = X" in text.
std::vector<double> accuracies_in(const std::string& text) {
  std::vector<double> found;
  for (const Match& m : all_matches(text, "test accuracy = ([0-9.]+)"))
    found.push_back(std::stod(m[1]));
  return found;
}

std::vector<std::string> checksums_in(const std::string& text) {
  std::vector<std::string> found;
  for (const Match& m : all_matches(text, "parameters crc32c = (0x[0-9A-F]+)"))
    found.push_back(m[1]);
  return found;
}

bool on_path(const std::string& command) {
  return run_command({"sh", "-c", "command -v " + command}).exit_code == 0;
}

// Open MPI's mpirun starting `ranks` copies of dtrain, told where rank 0 listens.
DtrainProcess::Options mpirun_options(int ranks) {
  DtrainProcess::Options options;
  options.own_process_group = true;  // mpirun's ranks die with it if the test gives up
  options.extra_env = {fmt::format("DTRAIN_SECRET={}", kLauncherSecret)};
  options.prefix = {"mpirun",
                    "--allow-run-as-root",
                    "--oversubscribe",
                    "-np",
                    std::to_string(ranks),
                    "-x",
                    "DTRAIN_SECRET",
                    "-x",
                    "MASTER_ADDR=127.0.0.1",
                    "-x",
                    fmt::format("MASTER_PORT={}", pick_free_ports(1)[0])};
  return options;
}

// Two ranks given only what torchrun gives: RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT (and the secret).
std::vector<ProcessResult> run_torchrun_style(int world, const std::vector<std::string>& flags,
                                              const std::vector<std::string>& rank_env = {}) {
  const uint16_t port = pick_free_ports(1)[0];
  std::vector<std::unique_ptr<DtrainProcess>> ranks;
  for (int r = 0; r < world; ++r) {
    DtrainProcess::Options options;
    options.extra_env = {
        fmt::format("RANK={}", r),           fmt::format("LOCAL_RANK={}", r),
        fmt::format("WORLD_SIZE={}", world), "MASTER_ADDR=127.0.0.1",
        fmt::format("MASTER_PORT={}", port), fmt::format("DTRAIN_SECRET={}", kLauncherSecret)};
    options.extra_env.insert(options.extra_env.end(), rank_env.begin(), rank_env.end());
    ranks.push_back(std::make_unique<DtrainProcess>(flags, options));
  }
  std::vector<ProcessResult> results;
  for (auto& rank : ranks) results.push_back(rank->wait());
  return results;
}

TEST(Launchers, TwoTorchrunStyleRanksTrainAllreduceToEqualParameters) {
  const std::vector<ProcessResult> results = run_torchrun_style(2, task_flags());
  std::vector<std::string> checksums;
  for (const ProcessResult& r : results) {
    ASSERT_EQ(r.exit_code, 0) << all_output(r);
    EXPECT_THAT(r.out, HasSubstr("from torchrun (RANK, WORLD_SIZE); rendezvous at 127.0.0.1:"));
    const std::vector<double> accuracy = accuracies_in(r.out);
    ASSERT_FALSE(accuracy.empty()) << r.out;
    EXPECT_GE(accuracy.back(), 0.90) << r.out;
    const std::vector<std::string> crc = checksums_in(r.out);
    ASSERT_EQ(crc.size(), 1u) << r.out;
    checksums.push_back(crc[0]);
  }
  EXPECT_EQ(checksums[0], checksums[1]);
}

TEST(Launchers, ThreeTorchrunStyleRanksWithOnePsTrainAsync) {
  const std::vector<ProcessResult> results =
      run_torchrun_style(3, concat(task_flags(), {"--ps", "1"}));
  for (const ProcessResult& r : results) ASSERT_EQ(r.exit_code, 0) << all_output(r);
  EXPECT_THAT(results[0].out, HasSubstr("rank 0 is ps:0"));
  for (int w : {1, 2}) {
    EXPECT_THAT(results[w].out, HasSubstr(fmt::format("rank {} is worker:{}", w, w - 1)));
    const std::vector<double> accuracy = accuracies_in(results[w].out);
    ASSERT_FALSE(accuracy.empty()) << results[w].out;
    EXPECT_GE(accuracy.back(), 0.90) << results[w].out;
  }
}

TEST(Launchers, ADuplicateRankEndsEveryRankWithOneErrorNamingIt) {
  const uint16_t port = pick_free_ports(1)[0];
  std::vector<std::unique_ptr<DtrainProcess>> ranks;
  for (int r : {0, 1, 1}) {
    DtrainProcess::Options options;
    options.extra_env = {fmt::format("RANK={}", r), "WORLD_SIZE=3", "MASTER_ADDR=127.0.0.1",
                         fmt::format("MASTER_PORT={}", port),
                         fmt::format("DTRAIN_SECRET={}", kLauncherSecret)};
    ranks.push_back(std::make_unique<DtrainProcess>(task_flags(), options));
  }
  for (auto& rank : ranks) {
    const ProcessResult r = rank->wait();
    EXPECT_EQ(r.exit_code, 1) << all_output(r);
    EXPECT_THAT(r.err, HasSubstr("rank 1 was claimed twice: from 127.0.0.1:")) << all_output(r);
  }
}

TEST(Launchers, FlagsOfTheLocalLauncherAreRefusedWithTheReason) {
  const std::vector<ProcessResult> results =
      run_torchrun_style(2, concat(task_flags(), {"--workers", "2"}));
  for (const ProcessResult& r : results) {
    EXPECT_EQ(r.exit_code, 2) << all_output(r);
    EXPECT_THAT(r.err, HasSubstr("--workers: the launcher that started this task decides"));
  }
}

TEST(Launchers, OpenMpisMpirunStartsThreeRanksWithOnePs) {
  if (!on_path("mpirun")) GTEST_SKIP() << "mpirun is not installed (Debian package openmpi-bin)";
  DtrainProcess mpirun(concat(task_flags(), {"--ps", "1"}), mpirun_options(3));
  const ProcessResult r = mpirun.wait();
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  EXPECT_EQ(count_lines_containing(r.out, "from Open MPI (OMPI_COMM_WORLD_RANK"), 3) << r.out;
  const std::vector<double> accuracy = accuracies_in(r.out);
  ASSERT_EQ(accuracy.size(), 2u) << r.out;
  for (double a : accuracy) EXPECT_GE(a, 0.90) << r.out;
}

TEST(Launchers, OpenMpisMpirunStartsTwoAllreduceRanksThatEndAlike) {
  if (!on_path("mpirun")) GTEST_SKIP() << "mpirun is not installed (Debian package openmpi-bin)";
  DtrainProcess mpirun(task_flags(), mpirun_options(2));
  const ProcessResult r = mpirun.wait();
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  const std::vector<double> accuracy = accuracies_in(r.out);
  ASSERT_EQ(accuracy.size(), 2u) << r.out;
  for (double a : accuracy) EXPECT_GE(a, 0.90) << r.out;
  const std::vector<std::string> crc = checksums_in(r.out);
  ASSERT_EQ(crc.size(), 2u) << r.out;
  EXPECT_EQ(crc[0], crc[1]);
  EXPECT_THAT(r.err, Not(HasSubstr("error")));
}

// srun on a one-node Slurm cluster the test starts itself, with no rendezvous given: the host is
// the job's node list's first, the port the default.
TEST(Launchers, SlurmsSrunStartsTwoAllreduceRanksThatMeetAtTheFirstNode) {
  if (const std::string why = OneNodeSlurm::unavailable(); !why.empty()) GTEST_SKIP() << why;
  const OneNodeSlurm slurm;
  std::vector<std::string> env = slurm.env();
  env.push_back(fmt::format("DTRAIN_SECRET={}", kLauncherSecret));
  DtrainProcess::Options options;
  options.own_process_group = true;
  options.extra_env = env;
  options.prefix = {"srun", "-n", "2"};
  DtrainProcess srun(task_flags(), options);
  const ProcessResult r = srun.wait();
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  EXPECT_EQ(count_lines_containing(r.out,
                                   "from Slurm (SLURM_PROCID, SLURM_NTASKS); rendezvous at "
                                   "localhost:29500 (the first host of SLURM_JOB_NODELIST)"),
            2)
      << r.out;
  const std::vector<double> accuracy = accuracies_in(r.out);
  ASSERT_EQ(accuracy.size(), 2u) << r.out;
  for (double a : accuracy) EXPECT_GE(a, 0.90) << r.out;
  const std::vector<std::string> crc = checksums_in(r.out);
  ASSERT_EQ(crc.size(), 2u) << r.out;
  EXPECT_EQ(crc[0], crc[1]);
}

}  // namespace
}  // namespace dtrain::testing
