// Where a task's place in a cluster comes from, with an injected environment: the tutorials'
// flags, then TF_CONFIG, then a --cluster file, then a launcher's ranks; --rendezvous only for the
// last.
#include "cluster/cluster_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "support/plan_args.h"
#include "support/temp_dir.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;

constexpr const char* kTfConfig =
    R"({"cluster": {"worker": ["localhost:2001", "localhost:2002"]},
        "task": {"type": "worker", "index": 1}})";

ClusterFlags tutorial_flags() {
  ClusterFlags f;
  f.ps_hosts = "localhost:1001";
  f.worker_hosts = "localhost:1002";
  f.job_name = "worker";
  f.ps_hosts_given = f.worker_hosts_given = f.job_name_given = true;
  return f;
}

std::string usage_error_of(const ClusterFlags& flags, const EnvLookup& env) {
  try {
    find_cluster_source(flags, env);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ClusterSource, TheTutorialFlagsComeBeforeTfConfigAndALauncher) {
  const ClusterSource found = find_cluster_source(
      tutorial_flags(), env_of({{"TF_CONFIG", kTfConfig}, {"RANK", "0"}, {"WORLD_SIZE", "2"}}));
  ASSERT_TRUE(found.cluster);
  EXPECT_EQ(found.source, "--ps_hosts/--worker_hosts/--job_name/--task_index");
  EXPECT_EQ(found.cluster->cluster.num_tasks(kPsJob), 1);
  EXPECT_FALSE(found.launcher);
}

TEST(ClusterSource, TfConfigComesBeforeAClusterFileAndALauncher) {
  TempDir dir;
  write_bytes(dir / "cluster.json", R"({"cluster": {"worker": ["localhost:3001"]}})");
  ClusterFlags flags;
  flags.cluster_file = (dir / "cluster.json").string();
  const ClusterSource found = find_cluster_source(
      flags, env_of({{"TF_CONFIG", kTfConfig}, {"RANK", "0"}, {"WORLD_SIZE", "2"}}));
  ASSERT_TRUE(found.cluster);
  EXPECT_EQ(found.source, "TF_CONFIG");
  EXPECT_EQ(found.cluster->task.index, 1);
  // An empty TF_CONFIG is none.
  flags.job_name = "worker";
  flags.job_name_given = true;
  const ClusterSource file = find_cluster_source(flags, env_of({{"TF_CONFIG", ""}}));
  ASSERT_TRUE(file.cluster);
  EXPECT_EQ(file.source, "--cluster " + flags.cluster_file + " and --job_name/--task_index");
}

TEST(ClusterSource, ALauncherIsReadOnlyWhenNothingElsePlacesTheTask) {
  const ClusterSource found = find_cluster_source(
      {}, env_of({{"RANK", "1"}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "10.0.0.1"}}));
  EXPECT_FALSE(found.cluster);
  ASSERT_TRUE(found.launcher);
  EXPECT_EQ(found.launcher->rank, 1);
  EXPECT_EQ(found.launcher->world_size, 3);
  EXPECT_FALSE(find_cluster_source({}, env_of({})).launcher);
}

TEST(ClusterSource, HostsWithoutAJobNameAreRefused) {
  ClusterFlags flags = tutorial_flags();
  flags.job_name_given = false;
  EXPECT_THAT(usage_error_of(flags, env_of({})),
              HasSubstr("--ps_hosts/--worker_hosts need --job_name"));
}

TEST(ClusterSource, ARendezvousOutsideALauncherIsRefusedByName) {
  ClusterFlags alone;
  alone.rendezvous = "localhost:29500";
  alone.rendezvous_given = true;
  EXPECT_THAT(usage_error_of(alone, env_of({})),
              HasSubstr("--rendezvous: no launcher gives this task a rank"));
  ClusterFlags placed = tutorial_flags();
  placed.rendezvous = "localhost:29500";
  placed.rendezvous_given = true;
  EXPECT_THAT(usage_error_of(placed, env_of({})),
              HasSubstr("--rendezvous: this task's place comes from --ps_hosts"));
}

}  // namespace
}  // namespace dtrain::testing
