// The local launcher runs real child processes (/bin/sh scripts standing in for tasks): their
// output arrives prefixed, a failing task stops the others, an interrupt stops all, and every
// child has been reaped when run_local_cluster returns.
#include "cluster/local_launcher.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "cluster/free_ports.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;

LocalTask shell_task(const std::string& name, const std::string& script) {
  return {name, {"-c", script}};
}

LaunchOptions shell_options() { return {.binary = "/bin/sh", .extra_env = {"DTRAIN_TEST_VAR=42"}}; }

// True if pid no longer exists: reaped children are gone; unreaped ones would be zombies.
bool process_gone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

pid_t read_pid(const std::filesystem::path& file) {
  std::ifstream in(file);
  pid_t pid = -1;
  in >> pid;
  return pid;
}

// Waits until every file exists (the children write them at start-up), within the patience the
// suite gives any child: a deadline against a child that never starts, not an expected duration.
bool wait_for_files(const std::vector<std::filesystem::path>& files) {
  const auto deadline = std::chrono::steady_clock::now() + testing::DtrainProcess::kPatience;
  while (std::chrono::steady_clock::now() < deadline) {
    bool all = true;
    for (const auto& f : files) all = all && std::filesystem::exists(f) && read_pid(f) > 0;
    if (all) return true;
    std::this_thread::yield();
  }
  return false;
}

TEST(LocalLauncher, PrefixesEveryLineWithTheTaskNameAndPassesTheEnvironment) {
  std::ostringstream out;
  const LaunchResult result =
      run_local_cluster({shell_task("ps0", "echo one; echo two >&2; printf 'no newline'"),
                         shell_task("worker0", "echo var=$DTRAIN_TEST_VAR")},
                        shell_options(), out);
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_TRUE(result.failed.empty());
  EXPECT_THAT(out.str(), HasSubstr("[ps0] one\n"));
  EXPECT_THAT(out.str(), HasSubstr("[ps0] two\n"));
  EXPECT_THAT(out.str(), HasSubstr("[ps0] no newline\n"));
  EXPECT_THAT(out.str(), HasSubstr("[worker0] var=42\n"));
}

// An inherited DTRAIN_SECRET came first in the children's environment, so getenv() found it and
// not the secret the launcher generated for them. printenv reads its variable with getenv().
TEST(LocalLauncher, ItsOwnVariablesReplaceInheritedOnesOfTheSameName) {
  ASSERT_EQ(::setenv("DTRAIN_TEST_VAR", "inherited", 1), 0);
  std::ostringstream out;
  const LaunchResult result =
      run_local_cluster({{"worker0", {"DTRAIN_TEST_VAR"}}},
                        {.binary = "/usr/bin/printenv", .extra_env = {"DTRAIN_TEST_VAR=42"}}, out);
  ::unsetenv("DTRAIN_TEST_VAR");
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(out.str(), "[worker0] 42\n");
}

TEST(LocalLauncher, AFailedTaskStopsTheOthersAndIsNamed) {
  testing::TempDir dir;
  const auto pid_file = dir / "long.pid";
  std::ostringstream out;
  // The long task would run for a minute; the failing one waits until it has started.
  const LaunchResult result = run_local_cluster(
      {shell_task("ps0", "echo $$ > " + pid_file.string() + "; exec sleep 60"),
       shell_task("worker1", "while [ ! -s " + pid_file.string() + " ]; do :; done; exit 3")},
      shell_options(), out);
  EXPECT_EQ(result.exit_code, 3);
  ASSERT_EQ(result.failed.size(), 1u);
  EXPECT_EQ(result.failed[0], "worker1 exited with code 3");
  EXPECT_TRUE(process_gone(read_pid(pid_file)));
}

TEST(LocalLauncher, InterruptStopsAndReapsEveryChild) {
  testing::TempDir dir;
  std::vector<LocalTask> tasks;
  std::vector<std::filesystem::path> pid_files;
  for (int i = 0; i < 3; ++i) {
    pid_files.push_back(dir / ("task" + std::to_string(i) + ".pid"));
    tasks.push_back(shell_task("worker" + std::to_string(i),
                               "echo $$ > " + pid_files.back().string() + "; exec sleep 60"));
  }
  std::ostringstream out;
  LaunchResult result;
  std::jthread launcher([&] { result = run_local_cluster(tasks, shell_options(), out); });
  ASSERT_TRUE(wait_for_files(pid_files));
  kill(getpid(), SIGINT);  // what Ctrl-C does to the launcher
  launcher.join();
  EXPECT_TRUE(result.interrupted);
  EXPECT_EQ(result.exit_code, 128 + SIGINT);
  EXPECT_TRUE(result.failed.empty()) << "children stopped by the launcher are not failures";
  for (const auto& f : pid_files) EXPECT_TRUE(process_gone(read_pid(f))) << f;
}

TEST(LocalLauncher, PicksDistinctFreePorts) {
  const std::vector<uint16_t> ports = pick_free_ports(8);
  ASSERT_EQ(ports.size(), 8u);
  EXPECT_EQ(std::set<uint16_t>(ports.begin(), ports.end()).size(), 8u);
  for (uint16_t p : ports) EXPECT_GT(p, 0);
}

// The kernel hands out ports in its ephemeral range to every connect() and every bind to port 0
// on the machine; a launcher's port there can be taken before its task binds it.
TEST(LocalLauncher, PicksPortsOutsideTheEphemeralRange) {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  int high = 0;
  ASSERT_TRUE(range >> low >> high);
  const PortBand band = port_band_outside(low, high);
  ASSERT_LE(band.first, band.last) << "no band outside " << low << "-" << high;
  for (uint16_t p : pick_free_ports(16)) {
    EXPECT_TRUE(p < low || p > high) << p << " is in the ephemeral range " << low << "-" << high;
    EXPECT_GE(p, band.first);
    EXPECT_LE(p, band.last);
  }
}

// A task that served on a held port and closed connections (they sit in TIME_WAIT) binds the
// port again when it restarts or forms a new ring: as it can a port it bound itself.
TEST(LocalLauncher, AHeldPortIsBoundAgainOverItsConnectionsInTimeWait) {
  const std::vector<HeldPort> held = hold_free_ports(1);
  ASSERT_EQ(held.size(), 1u);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(held[0].port);
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  const int accepted = accept(held[0].fd, nullptr, nullptr);
  ASSERT_GE(accepted, 0);
  close(accepted);  // the server's side closes first: its end goes to TIME_WAIT
  char byte = 0;
  ASSERT_EQ(read(client, &byte, 1), 0);
  close(client);
  close(held[0].fd);
  const int again = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ASSERT_EQ(setsockopt(again, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), 0);
  EXPECT_EQ(bind(again, reinterpret_cast<sockaddr*>(&address), sizeof address), 0)
      << std::strerror(errno);
  close(again);
}

TEST(LocalLauncher, PortBandAvoidsTheEphemeralRangeAndWellKnownPorts) {
  EXPECT_EQ(port_band_outside(32768, 60999).first, 16384);  // Linux's default range
  EXPECT_EQ(port_band_outside(32768, 60999).last, 32767);
  EXPECT_EQ(port_band_outside(1024, 40000).first, 40001);  // a range from low: above it
  EXPECT_EQ(port_band_outside(1024, 40000).last, 65535);
  const PortBand none = port_band_outside(1024, 65000);  // no room either side
  EXPECT_GT(none.first, none.last);
  // 616 ports below are too few, so above: 61000 and up.
  EXPECT_EQ(port_band_outside(17000, 60999).first, 61000);
  const PortBand narrow = port_band_outside(17000, 65000);  // 616 below, 535 above
  EXPECT_GT(narrow.first, narrow.last);
}

}  // namespace
}  // namespace dtrain
