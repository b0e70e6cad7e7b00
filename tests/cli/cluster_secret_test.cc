// The cluster secret on real processes: the local launcher's tasks get the secret it generated
// whatever DTRAIN_SECRET the user's shell holds, and a task refuses a secret too short to resist
// guessing, saying how to make one.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <utility>

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
  std::filesystem::permissions(dir / "secret", std::filesystem::perms::owner_read);
  const ProcessResult from_file =
      cluster.start("worker", 0, concat(flags, {"--secret_file", (dir / "secret").string()}))
          ->wait();
  EXPECT_EQ(from_file.exit_code, 2) << from_file.out << from_file.err;
  EXPECT_THAT(from_file.err, HasSubstr("--secret_file " + (dir / "secret").string() +
                                       ": the cluster secret is 5 bytes"));
}

// Whoever may read the secret may join the cluster; ssh refuses a private key on the same
// grounds. The file's mode is what counts, also behind a link (as Kubernetes mounts a Secret).
TEST(ClusterSecret, ASecretFileOthersMayReadOrWriteIsRefusedSayingChmod600) {
  HandStartedCluster cluster(1, 1);
  const std::vector<std::string> flags = concat(softmax_flags(), {"--train_steps", "10"});
  TempDir dir;
  const std::filesystem::path secret = dir / "secret";
  std::ofstream(secret) << "a secret of more than sixteen bytes\n";
  std::filesystem::create_symlink(secret, dir / "link");
  using std::filesystem::perms;
  const std::vector<std::pair<perms, std::string>> modes = {
      {perms::owner_read | perms::owner_write | perms::group_read, "640"},
      {perms::owner_read | perms::others_read, "404"},
      {perms::owner_read | perms::group_write, "420"}};
  for (const auto& [mode, octal] : modes) {
    std::filesystem::permissions(secret, mode);
    for (const std::filesystem::path& given : {secret, dir / "link"}) {
      const ProcessResult r =
          cluster.start("worker", 0, concat(flags, {"--secret_file", given.string()}))->wait();
      EXPECT_EQ(r.exit_code, 2) << octal << "\n" << r.out << r.err;
      EXPECT_THAT(r.err, HasSubstr(fmt::format("--secret_file {}: may be read or written by "
                                               "others (mode {}): chmod 600 {}",
                                               given.string(), octal, given.string())));
    }
  }
}

}  // namespace
}  // namespace dtrain::testing
