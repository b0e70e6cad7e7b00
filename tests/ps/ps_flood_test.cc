// Connection floods against a real ps task, by peers that do not know the secret: descriptors
// and threads are the ps's to keep, so a flood may cost the flooding connections their place but
// never the real workers theirs.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/connect.h"
#include "comm/connection.h"
#include "support/ps_cluster.h"
#include "support/temp_dir.h"
#include "support/text_match.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;

// A TCP connection that says nothing; closed when destroyed.
class SilentPeer {
 public:
  explicit SilentPeer(uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 &&
                 ::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  }
  ~SilentPeer() {
    if (fd_ >= 0) ::close(fd_);
  }
  SilentPeer(const SilentPeer&) = delete;
  SilentPeer& operator=(const SilentPeer&) = delete;
  bool connected() const { return connected_; }

 private:
  int fd_;
  bool connected_ = false;
};

// Blocks until the ps at port completes a handshake with the cluster secret.
void wait_until_listening(uint16_t port) {
  ConnectionOptions options;
  options.task_name = "ps0";
  options.connect_timeout_ms = 60'000;
  dtrain::connect("127.0.0.1", port, std::string(kSecret), options)->close();
}

TEST(PsFlood, AfterSeventySilentConnectionsAgainstA32DescriptorPsAWorkerStillTrains) {
  HandStartedCluster cluster(1, 1);
  const std::vector<std::string> flags = concat(softmax_flags(), {"--train_steps", "50"});
  // 32 descriptors: a dozen are the ps's own, so the flood runs it out of them before the cap on
  // connections still authenticating (32) is reached.
  const auto ps = cluster.start("ps", 0, flags, kSecret, {"prlimit", "--nofile=32:32", "--"});
  const uint16_t port = cluster.ps_port(0);
  wait_until_listening(port);
  {
    std::vector<std::unique_ptr<SilentPeer>> flood;
    for (int i = 0; i < 70; ++i) flood.push_back(std::make_unique<SilentPeer>(port));
    int connected = 0;
    for (const auto& peer : flood) connected += peer->connected() ? 1 : 0;
    // The kernel completes connections into the backlog whether or not the ps accepts them.
    EXPECT_GE(connected, 64);
    EXPECT_THAT(ps->wait_for_line("still authenticating"),
                HasSubstr("the server ran out of descriptors"));
  }  // they leave

  const ProcessResult worker = cluster.start("worker", 0, flags)->wait();
  const ProcessResult ps_result = ps->wait();
  ASSERT_EQ(worker.exit_code, 0) << all_output(worker) << all_output(ps_result);
  EXPECT_THAT(worker.out, HasSubstr("worker=0: test accuracy = 0."));
  ASSERT_EQ(ps_result.exit_code, 0) << all_output(ps_result);
}

TEST(PsFlood, AfterAFloodAgainstAPsLimitedToTwelveThreadsAWorkerStillTrains) {
  // RLIMIT_NPROC, the limit on a user's threads, does not bind root: the ps runs as nobody, from a
  // copy of the binary that nobody may run wherever the build is.
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to run the ps as nobody";
  TempDir dir;
  std::filesystem::permissions(
      dir.path(), std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                      std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                      std::filesystem::perms::others_exec);
  const std::filesystem::path binary = dir / "dtrain";
  std::filesystem::copy_file(DTRAIN_BINARY, binary);
  HandStartedCluster cluster(1, 1);
  const std::vector<std::string> flags = concat(softmax_flags(), {"--train_steps", "50"});
  // Twelve threads for nobody: the ps's own few, and one for each authenticated connection; its
  // handshakes take none. (LeakSanitizer's exit check would need a thread beyond them: off in this
  // process alone.)
  const auto ps = cluster.start("ps", 0, flags, kSecret,
                                {"env", "ASAN_OPTIONS=detect_leaks=0", "setpriv", "--reuid=nobody",
                                 "--regid=nogroup", "--clear-groups", "prlimit", "--nproc=12:12",
                                 "--", "sh", "-c", "shift; exec \"$0\" \"$@\"", binary.string()});
  const uint16_t port = cluster.ps_port(0);
  wait_until_listening(port);
  {
    std::vector<std::unique_ptr<SilentPeer>> flood;
    for (int i = 0; i < 70; ++i) flood.push_back(std::make_unique<SilentPeer>(port));
    // Held until the ps has accepted more than it lets authenticate at once.
    EXPECT_THAT(ps->wait_for_line("still authenticating"),
                HasSubstr("too many connections were authenticating at once"));
  }  // they leave

  const ProcessResult worker = cluster.start("worker", 0, flags)->wait();
  const ProcessResult ps_result = ps->wait();
  ASSERT_EQ(worker.exit_code, 0) << all_output(worker) << all_output(ps_result);
  EXPECT_THAT(worker.out, HasSubstr("worker=0: test accuracy = 0."));
  ASSERT_EQ(ps_result.exit_code, 0) << all_output(ps_result);
}

}  // namespace
}  // namespace dtrain::testing
