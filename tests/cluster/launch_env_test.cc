// Rank and world from each launcher's variables, the order in which launchers are tried, and where
// the rendezvous is; every bad value is an error naming its variable.
#include "cluster/launch_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;

EnvLookup env_of(std::map<std::string, std::string, std::less<>> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    const auto found = vars.find(name);
    if (found == vars.end()) return std::nullopt;
    return found->second;
  };
}

std::string usage_error_of(const EnvLookup& env, const std::string& flag = "") {
  try {
    launch_env_from(env, flag);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "no error";
}

TEST(LaunchEnv, NoLauncherVariablesIsNoLauncher) {
  EXPECT_FALSE(launch_env_from(env_of({{"MASTER_ADDR", "h"}, {"HOME", "/root"}}), ""));
}

TEST(LaunchEnv, TorchrunVariablesGiveRankWorldAndTheMasterAddress) {
  const auto launch = launch_env_from(env_of({{"RANK", "1"},
                                              {"WORLD_SIZE", "3"},
                                              {"LOCAL_RANK", "1"},
                                              {"MASTER_ADDR", "10.0.0.1"},
                                              {"MASTER_PORT", "29400"}}),
                                      "");
  ASSERT_TRUE(launch);
  EXPECT_EQ(launch->rank, 1);
  EXPECT_EQ(launch->world_size, 3);
  EXPECT_EQ(launch->local_rank, 1);
  EXPECT_EQ(launch->rendezvous, (HostPort{"10.0.0.1", 29400}));
  EXPECT_THAT(launch->source, HasSubstr("torchrun (RANK, WORLD_SIZE)"));
  EXPECT_EQ(launch->rendezvous_source, "MASTER_ADDR and MASTER_PORT");
}

TEST(LaunchEnv, OpenMpiComesBeforeSlurmWhoseProcidMpirunLeavesAtZero) {
  // Inside sbatch, every process mpirun starts sees SLURM_PROCID=0.
  const auto launch = launch_env_from(env_of({{"OMPI_COMM_WORLD_RANK", "2"},
                                              {"OMPI_COMM_WORLD_SIZE", "4"},
                                              {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                              {"SLURM_PROCID", "0"},
                                              {"SLURM_NTASKS", "1"},
                                              {"SLURM_JOB_NODELIST", "node[07-09]"}}),
                                      "");
  ASSERT_TRUE(launch);
  EXPECT_EQ(launch->rank, 2);
  EXPECT_EQ(launch->world_size, 4);
  EXPECT_THAT(launch->source, HasSubstr("Open MPI"));
  // No MASTER_ADDR: the job's first node, at the default port.
  EXPECT_EQ(launch->rendezvous, (HostPort{"node07", kDefaultRendezvousPort}));
  EXPECT_EQ(launch->rendezvous_source, "the first host of SLURM_JOB_NODELIST");
}

TEST(LaunchEnv, MpichPmiVariablesAreRead) {
  const auto launch = launch_env_from(
      env_of({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "1"}}), "h:7000");
  ASSERT_TRUE(launch);
  EXPECT_EQ(launch->rank, 1);
  EXPECT_EQ(launch->local_rank, 1);
  EXPECT_THAT(launch->source, HasSubstr("MPICH"));
}

TEST(LaunchEnv, SlurmAloneUsesItsProcidAndTheFirstNodeWithMasterPortIfSet) {
  const auto launch = launch_env_from(env_of({{"SLURM_PROCID", "1"},
                                              {"SLURM_NTASKS", "2"},
                                              {"SLURM_LOCALID", "1"},
                                              {"SLURM_JOB_NODELIST", "gpu-[3,5]"},
                                              {"MASTER_PORT", "31000"}}),
                                      "");
  ASSERT_TRUE(launch);
  EXPECT_EQ(launch->rank, 1);
  EXPECT_EQ(launch->rendezvous, (HostPort{"gpu-3", 31000}));
}

TEST(LaunchEnv, TheRendezvousFlagComesBeforeMasterAddr) {
  const auto launch = launch_env_from(
      env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}}),
      "b:2");
  ASSERT_TRUE(launch);
  EXPECT_EQ(launch->rendezvous, (HostPort{"b", 2}));
  EXPECT_EQ(launch->rendezvous_source, "--rendezvous");
}

TEST(LaunchEnv, AnIpv6MasterAddrIsBracketed) {
  const auto launch =
      launch_env_from(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "::1"}}), "");
  ASSERT_TRUE(launch);
  EXPECT_EQ(launch->rendezvous, (HostPort{"::1", kDefaultRendezvousPort}));
}

TEST(LaunchEnv, BadValuesAreErrorsNamingTheirVariable) {
  EXPECT_THAT(usage_error_of(env_of({{"RANK", "one"}, {"WORLD_SIZE", "2"}})),
              HasSubstr("RANK=one: expected a whole number"));
  EXPECT_THAT(usage_error_of(env_of({{"RANK", "0"}})), HasSubstr("WORLD_SIZE is not set"));
  EXPECT_THAT(usage_error_of(env_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}})),
              HasSubstr("RANK=2: outside the world of WORLD_SIZE=2"));
  EXPECT_THAT(usage_error_of(env_of({{"RANK", "-1"}, {"WORLD_SIZE", "2"}})), HasSubstr("RANK=-1"));
  EXPECT_THAT(
      usage_error_of(env_of(
          {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "99999"}})),
      HasSubstr("MASTER_ADDR/MASTER_PORT"));
  EXPECT_THAT(usage_error_of(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}}), "nohostport"),
              HasSubstr("--rendezvous"));
}

TEST(LaunchEnv, RanksWithoutARendezvousAreToldHowToGiveOne) {
  EXPECT_THAT(
      usage_error_of(env_of({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}})),
      HasSubstr("give --rendezvous HOST:PORT, or set MASTER_ADDR"));
  // Ranks spread over two hosts cannot meet on localhost.
  EXPECT_THAT(usage_error_of(env_of({{"OMPI_COMM_WORLD_RANK", "0"},
                                     {"OMPI_COMM_WORLD_SIZE", "4"},
                                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}})),
              HasSubstr("give --rendezvous HOST:PORT, or set MASTER_ADDR"));
}

// mpirun -np 2 on one machine: no MASTER_ADDR, and none needed.
TEST(LaunchEnv, RanksThatAllShareThisHostMeetOnItsLoopback) {
  for (const auto& [vars, says] :
       std::vector<std::pair<std::map<std::string, std::string, std::less<>>, std::string>>{
           {{{"OMPI_COMM_WORLD_RANK", "1"},
             {"OMPI_COMM_WORLD_SIZE", "2"},
             {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
            "OMPI_COMM_WORLD_LOCAL_SIZE"},
           {{{"PMI_RANK", "0"}, {"PMI_SIZE", "3"}, {"MPI_LOCALNRANKS", "3"}}, "MPI_LOCALNRANKS"},
           {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_NUM_NODES", "1"}},
            "SLURM_STEP_NUM_NODES"},
           {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_PORT", "7"}},
            "LOCAL_WORLD_SIZE"}}) {
    const auto launch = launch_env_from(env_of(vars), "");
    ASSERT_TRUE(launch) << says;
    const uint16_t port = vars.contains("MASTER_PORT") ? 7 : kDefaultRendezvousPort;
    EXPECT_EQ(launch->rendezvous, (HostPort{"127.0.0.1", port})) << says;
    EXPECT_THAT(launch->rendezvous_source, HasSubstr(says));
  }
}

// `mpirun -np 1 dtrain train` trains in that one process; the caller decides.
TEST(LaunchEnv, AWorldOfOneNeedsNoRendezvous) {
  const auto launch = launch_env_from(env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}}), "");
  ASSERT_TRUE(launch);
  EXPECT_EQ(launch->world_size, 1);
  EXPECT_EQ(std::string(launch->world_size_variable), "WORLD_SIZE");
}

}  // namespace
}  // namespace dtrain
