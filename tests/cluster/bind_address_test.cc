// Where tasks listen: a local cluster's tasks on loopback alone, a task whose address in the spec
// is not this host's on every interface (saying so), and --bind over both. Checked in the
// kernel's own table of listening sockets (/proc/net/tcp), not in what the task says.
#include "cluster/bind_address.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/text_match.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;

// The IPv4 addresses ("127.0.0.1", "0.0.0.0") with a listening socket on port, from /proc/net/tcp,
// where "0100007F:1F90" is 127.0.0.1:8080 (the address in the kernel's byte order).
std::set<std::string> listening_on(uint16_t port) {
  std::set<std::string> addresses;
  std::ifstream table("/proc/net/tcp");
  std::string line;
  std::getline(table, line);  // the header
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    if (state != "0A") continue;  // TCP_LISTEN
    const auto colon = local.find(':');
    if (std::stoul(local.substr(colon + 1), nullptr, 16) != port) continue;
    const uint32_t raw = static_cast<uint32_t>(std::stoul(local.substr(0, colon), nullptr, 16));
    addresses.insert(
        fmt::format("{}.{}.{}.{}", raw & 0xff, (raw >> 8) & 0xff, (raw >> 16) & 0xff, raw >> 24));
  }
  return addresses;
}

DtrainProcess::Options with_secret() {
  DtrainProcess::Options options;
  options.extra_env = {secret_env(kSecret)};
  return options;
}

uint16_t port_in(const std::string& line) {
  const auto match = first_match(line, R"(listening on [0-9.]+:([0-9]+))");
  return match ? static_cast<uint16_t>(std::stoi((*match)[1])) : 0;
}

TEST(BindAddress, ALocalClustersTasksListenOnLoopbackAlone) {
  DtrainProcess run(concat(concat({"train"}, softmax_flags()),
                           {"--strategy", "async", "--ps", "1", "--workers", "1", "--train_steps",
                            "2000", "--step_delay_ms", "1"}));
  const std::string line = run.wait_for_line("ps0: listening on");
  const uint16_t port = port_in(line);
  ASSERT_NE(port, 0) << line;
  EXPECT_THAT(line, HasSubstr("listening on 127.0.0.1:"));
  EXPECT_EQ(listening_on(port), std::set<std::string>{"127.0.0.1"});
  run.send_signal(SIGINT);
  run.wait();
}

TEST(BindAddress, ATaskWhoseAddressIsAnotherHostsListensEverywhereAndSaysSoUnlessBindSays) {
  // 192.0.2.0/24 is TEST-NET-1: never an address of this host.
  const uint16_t port = HandStartedCluster(1, 1).ps_port(0);
  const std::vector<std::string> task = {"task",
                                         "--job_name",
                                         "ps",
                                         "--task_index",
                                         "0",
                                         "--ps_hosts",
                                         fmt::format("192.0.2.1:{}", port),
                                         "--worker_hosts",
                                         "192.0.2.2:2222"};
  {
    DtrainProcess ps(concat(task, softmax_flags()), with_secret());
    const std::string line = ps.wait_for_line("ps0: listening on");
    EXPECT_THAT(line, HasSubstr("listening on 0.0.0.0:"));
    EXPECT_THAT(line, HasSubstr("192.0.2.1 is not an address of this host"));
    EXPECT_EQ(listening_on(port), std::set<std::string>{"0.0.0.0"});
  }
  DtrainProcess bound(concat(task, concat(softmax_flags(), {"--bind", "127.0.0.1"})),
                      with_secret());
  const std::string line = bound.wait_for_line("ps0: listening on");
  EXPECT_THAT(line, HasSubstr("listening on 127.0.0.1:"));
  EXPECT_THAT(line, HasSubstr("(--bind)"));
  EXPECT_EQ(listening_on(port), std::set<std::string>{"127.0.0.1"});
}

TEST(BindAddress, ANameOfThisHostBindsItsAddress) {
  EXPECT_EQ(bind_address_for({"localhost", 1}, "").host, "127.0.0.1");
  EXPECT_EQ(bind_address_for({"127.0.0.5", 1}, "").host, "127.0.0.5");
  EXPECT_EQ(bind_address_for({"192.0.2.1", 1}, "").host, "0.0.0.0");
  EXPECT_EQ(bind_address_for({"192.0.2.1", 1}, "::1").host, "::1");
}

}  // namespace
}  // namespace dtrain::testing
