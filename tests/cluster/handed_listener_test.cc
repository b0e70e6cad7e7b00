// A task serves on the listening socket its launcher bound for it (DTRAIN_LISTEN_FD), so no other
// process can take the port in between: with the port still held elsewhere, a task that bound it
// itself would fail, and this one serves. The local launcher hands each task its own listener, on
// its first start only.
#include <fcntl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sstream>

#include "cluster/free_ports.h"
#include "cluster/local_launcher.h"
#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/temp_dir.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A ps task of a one-worker cluster whose ps address is localhost:port.
std::vector<std::string> serving_ps_task(uint16_t port) {
  std::vector<std::string> args = {"task",
                                   "--job_name",
                                   "ps",
                                   "--task_index",
                                   "0",
                                   "--ps_hosts",
                                   fmt::format("localhost:{}", port),
                                   "--worker_hosts",
                                   "localhost:2222"};
  for (std::string& flag : softmax_flags()) args.push_back(std::move(flag));
  return args;
}

// The held sockets, closed at the end of the test.
struct HeldListeners {
  explicit HeldListeners(int n) : ports(hold_free_ports(n)) {}
  ~HeldListeners() {
    for (const HeldPort& h : ports) close(h.fd);
  }
  std::vector<HeldPort> ports;
};

// Starts a ps task on `port` with `inherited` (a descriptor without close-on-exec) named in its
// environment, or none when -1, and returns its line saying where it listens.
std::string first_listen_line(uint16_t port, int inherited) {
  DtrainProcess::Options options;
  options.extra_env = {secret_env(kSecret)};
  if (inherited >= 0) options.extra_env.push_back(fmt::format("DTRAIN_LISTEN_FD={}", inherited));
  DtrainProcess ps(serving_ps_task(port), options);
  const std::string line = ps.wait_for_line_where(
      [](const std::string& l) { return l.find("listening on") != std::string::npos; });
  ps.send_signal(SIGINT);
  ps.wait();
  return line;
}

TEST(HandedListener, ATaskServesOnTheSocketItInheritsWhileThePortIsHeldElsewhere) {
  HeldListeners held(1);
  const uint16_t port = held.ports[0].port;
  const int inherited = dup(held.ports[0].fd);  // dup: without close-on-exec
  ASSERT_GE(inherited, 0);
  const std::string line = first_listen_line(port, inherited);
  close(inherited);
  EXPECT_THAT(line, HasSubstr(fmt::format("listening on 127.0.0.1:{}", port)));
}

// The control: the same task, not handed the socket, cannot bind a port that is held.
TEST(HandedListener, WithoutItTheTaskCannotListenOnAHeldPort) {
  HeldListeners held(1);
  DtrainProcess::Options options;
  options.extra_env = {secret_env(kSecret)};
  DtrainProcess ps(serving_ps_task(held.ports[0].port), options);
  const ProcessResult result = ps.wait();
  EXPECT_NE(result.exit_code, 0);
  EXPECT_THAT(result.err,
              HasSubstr(fmt::format("cannot listen on 127.0.0.1:{}: Address already in use",
                                    held.ports[0].port)));
}

// A variable naming a descriptor that is not a listener on the task's port (what a process may
// leave in its children's environment) is passed over: the task binds its own port.
TEST(HandedListener, ADescriptorOnAnotherPortIsPassedOver) {
  HeldListeners held(2);
  const uint16_t free_port = held.ports[1].port;
  close(held.ports[1].fd);
  held.ports[1].fd = -1;
  const int other = dup(held.ports[0].fd);
  ASSERT_GE(other, 0);
  const std::string line = first_listen_line(free_port, other);
  close(other);
  EXPECT_THAT(line, HasSubstr(fmt::format("listening on 127.0.0.1:{}", free_port)));
  EXPECT_THAT(first_listen_line(free_port, STDERR_FILENO),
              HasSubstr(fmt::format("listening on 127.0.0.1:{}", free_port)));
}

std::string socket_link(int fd) {
  struct stat s {};
  if (fstat(fd, &s) != 0) return "closed";
  return fmt::format("socket:[{}]", s.st_ino);
}

// Each task's first start sees its own listener and not the other's; a restarted task is given
// none (its port is its own to bind again); and the launcher keeps no copy once they started.
TEST(HandedListener, TheLauncherHandsEachTaskItsOwnOnItsFirstStartOnly) {
  TempDir dir;
  HeldListeners held(2);
  const int a = held.ports[0].fd;
  const int b = held.ports[1].fd;
  const std::string a_link = socket_link(a);
  const std::string b_link = socket_link(b);
  // The first start prints its variable and every descriptor it has, then crashes; the restart
  // prints its variable.
  auto script = [&](const std::string& name) {
    const std::string marker = (dir.path() / name).string();
    return fmt::format(
        "if [ -e {m} ]; then echo restart=${{DTRAIN_LISTEN_FD:-none}}; exit 0; fi; touch {m}; "
        "echo own=$DTRAIN_LISTEN_FD $(for f in /proc/$$/fd/*; do readlink $f; done); kill -9 $$",
        fmt::arg("m", marker));
  };
  // The line the first start of `name` printed.
  auto first_line = [](const std::string& out, const std::string& name) {
    const std::string prefix = fmt::format("[{}] own=", name);
    const size_t at = out.find(prefix);
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  std::vector<LocalTask> tasks = {{"ps0", {"-c", script("ps0")}},
                                  {"worker0", {"-c", script("worker0")}}};
  tasks[0].listen_fd = a;
  tasks[1].listen_fd = b;
  held.ports.clear();  // run_local_cluster closes them
  std::ostringstream out;
  const LaunchResult result = run_local_cluster(
      tasks,
      {.binary = "/bin/sh", .extra_env = {}, .max_restarts = 2, .restart = RestartPolicy::kTask},
      out);
  EXPECT_EQ(result.exit_code, 0) << out.str();
  EXPECT_EQ(result.restarts, 2);
  const std::string ps0 = first_line(out.str(), "ps0");
  const std::string worker0 = first_line(out.str(), "worker0");
  EXPECT_THAT(ps0, HasSubstr(fmt::format("own={} ", a)));
  EXPECT_THAT(ps0, HasSubstr(a_link));
  EXPECT_THAT(ps0, Not(HasSubstr(b_link)));
  EXPECT_THAT(worker0, HasSubstr(fmt::format("own={} ", b)));
  EXPECT_THAT(worker0, HasSubstr(b_link));
  EXPECT_THAT(worker0, Not(HasSubstr(a_link)));
  EXPECT_THAT(out.str(), HasSubstr("[ps0] restart=none"));
  EXPECT_THAT(out.str(), HasSubstr("[worker0] restart=none"));
  EXPECT_EQ(fcntl(a, F_GETFD), -1) << "the launcher still holds ps0's listener";
  EXPECT_EQ(fcntl(b, F_GETFD), -1) << "the launcher still holds worker0's listener";
}

}  // namespace
}  // namespace dtrain::testing
