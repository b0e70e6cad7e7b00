// The cluster secret on real processes: the local launcher's tasks get the secret it generated
// whatever DTRAIN_SECRET the user's shell holds, and a task refuses a secret too short to resist
// guessing, saying how to make one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/temp_dir.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;

TEST(ClusterSecret, AnInheritedSecretNeverReachesTheLaunchersTasks) {
  for (const char* inherited : {"DTRAIN_SECRET=", "DTRAIN_SECRET=a"}) {
    const ProcessResult r = run_dtrain(
        concat(concat({"train"}, softmax_flags()),
               {"--strategy", "async", "--ps", "1", "--workers", "2", "--train_steps", "20"}),
        {inherited});
    EXPECT_EQ(r.exit_code, 0) << inherited << "\n" << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr("worker=0: test accuracy")) << inherited;
  }
}

TEST(ClusterSecret, ATaskRefusesASecretUnder16BytesSayingHowToMakeOne) {
  HandStartedCluster cluster(1, 1);
  const std::vector<std::string> flags = concat(softmax_flags(), {"--train_steps", "10"});
  const ProcessResult r = cluster.start("ps", 0, flags, "fifteen bytes!!")->wait();
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("DTRAIN_SECRET: the cluster secret is 15 bytes"));
  EXPECT_THAT(r.err, HasSubstr("openssl rand -hex 32"));

  TempDir dir;
  std::ofstream(dir / "secret") << "short\n";
  const ProcessResult from_file =
      cluster.start("worker", 0, concat(flags, {"--secret_file", (dir / "secret").string()}))
          ->wait();
  EXPECT_EQ(from_file.exit_code, 2) << from_file.out << from_file.err;
  EXPECT_THAT(from_file.err, HasSubstr("--secret_file " + (dir / "secret").string() +
                                       ": the cluster secret is 5 bytes"));
}

}  // namespace
}  // namespace dtrain::testing
