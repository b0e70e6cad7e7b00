// The congestion control of dtrain's sockets: each end runs the one it was given from the first
// byte (a client sets it before connecting, a server on its listener, which accepted connections
// inherit), and a name the host does not offer is refused naming what it does.
#include "comm/tcp_congestion.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <fstream>
#include <future>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "comm/loopback.h"
#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/text_match.h"
#include "support/virtual_network.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;

std::string algorithm_of(int fd) {
  char name[64] = {};
  socklen_t length = sizeof name - 1;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &length) != 0)
    return "(getsockopt failed)";
  return std::string(name, strnlen(name, length));
}

std::string host_setting(const char* file) {
  std::ifstream in(std::string("/proc/sys/net/ipv4/") + file);
  std::string line;
  std::getline(in, line);
  return line;
}

bool lists(const std::string& algorithms, const std::string& name) {
  std::istringstream words(algorithms);
  for (std::string word; words >> word;) {
    if (word == name) return true;
  }
  return false;
}

// Connects a client given `client_choice` to a server given `server_choice`; returns what the
// client's socket and the server's accepted socket run.
std::pair<std::string, std::string> connect_with(const std::string& server_choice,
                                                 const std::string& client_choice) {
  std::promise<std::string> accepted;
  std::future<std::string> accepted_algorithm = accepted.get_future();
  ServerOptions options = testing::loopback_options();
  options.connection.tcp_congestion = server_choice;
  Server server(options, [&accepted](Connection& connection) {
    accepted.set_value(algorithm_of(connection.socket_fd()));
    connection.receive();  // until the client closes
  });
  ConnectionOptions client = testing::client_options();
  client.tcp_congestion = client_choice;
  auto connection = connect("127.0.0.1", server.port(), testing::kLoopbackSecret, client);
  const std::string mine = algorithm_of(connection->socket_fd());
  EXPECT_EQ(accepted_algorithm.wait_for(testing::kPatience), std::future_status::ready);
  return {mine, accepted_algorithm.get()};
}

// reno is built into every Linux kernel and always allowed, so the test does not depend on the
// host's modules; the client and server are given different algorithms to show each is its own.
TEST(TcpCongestion, EachEndRunsTheAlgorithmItWasGivenFromItsFirstByte) {
  const auto [client, server] = connect_with("reno", std::string(kTcpCongestionHost));
  EXPECT_EQ(server, "reno");  // inherited from the listener: the handshake ran under it too
  EXPECT_EQ(client, host_setting("tcp_congestion_control"));
}

TEST(TcpCongestion, ANameTheHostDoesNotOfferIsRefusedNamingWhatItAllows) {
  EXPECT_EQ(tcp_congestion_refusal(kTcpCongestionAuto), "");
  EXPECT_EQ(tcp_congestion_refusal(kTcpCongestionHost), "");
  EXPECT_EQ(tcp_congestion_refusal("reno"), "");
  const std::string why = tcp_congestion_refusal("no-such-algorithm");
  EXPECT_THAT(why, HasSubstr("'no-such-algorithm'"));
  EXPECT_THAT(why, HasSubstr("no such algorithm loaded"));
  EXPECT_THAT(why, HasSubstr("allows: " + host_setting("tcp_allowed_congestion_control")));
  // A connection asked for it fails at once, saying why, rather than retrying until its timeout.
  ServerOptions options = testing::loopback_options();
  Server server(options, [](Connection&) {});
  ConnectionOptions client = testing::client_options();
  client.tcp_congestion = "no-such-algorithm";
  try {
    connect("127.0.0.1", server.port(), testing::kLoopbackSecret, client);
    ADD_FAILURE() << "connected";
  } catch (const TransportError& error) {
    EXPECT_THAT(error.what(), HasSubstr("'no-such-algorithm'"));
  }
  options.connection.tcp_congestion = "no-such-algorithm";
  EXPECT_THROW(Server(options, [](Connection&) {}), TransportError);
}

// What `auto` means, on a host the test makes rather than on this machine's settings: a network
// namespace whose own default (net.ipv4.tcp_congestion_control is kept per namespace) is reno,
// which no host of the kind defaults to, and a real two-worker all-reduce over TCP run there, as
// root and without CAP_NET_ADMIN. `auto` is cubic wherever the kernel lets the process set it on
// a socket -- a process with CAP_NET_ADMIN may set any algorithm the kernel has, one without it
// only those net.ipv4.tcp_allowed_congestion_control lists -- and the host's own elsewhere. The
// allowed list (like the list of algorithms the kernel has) is one for the whole machine, not per
// namespace, and setting it would change every other process's: the test reads it instead, so
// on a machine that allows cubic the unprivileged run expects cubic too.
class TcpCongestionOnAHostOfItsOwn : public ::testing::Test {
 protected:
  static constexpr char kHostsOwn[] = "reno";  // built into every kernel, and always allowed

  void SetUp() override {
    if (const auto why = testing::VirtualNetwork::unavailable()) GTEST_SKIP() << *why;
    network_.emplace(1);
    network_->set_sysctl(0, "net.ipv4.tcp_congestion_control", kHostsOwn);
  }

  // A two-worker all-reduce on the namespace, every link TCP, given `choice`; with
  // `net_admin` false it runs as root still, but without CAP_NET_ADMIN (setpriv drops it from the
  // bounding set, so neither the launcher nor its workers get it back at exec).
  testing::ProcessResult train(const std::string& choice, bool net_admin) {
    testing::DtrainProcess::Options options;
    options.prefix = network_->run_on(0);
    if (!net_admin) {
      options.prefix.insert(options.prefix.end(), {"setpriv", "--bounding-set=-net_admin",
                                                   "--inh-caps=-net_admin", "--"});
    }
    testing::DtrainProcess launcher(
        testing::concat({"train", "--strategy", "allreduce", "--workers", "2", "--transport", "tcp",
                         "--train_steps", "5", "--tcp_congestion", choice},
                        testing::softmax_flags()),
        options);
    return launcher.wait();
  }

  // What every worker says its links run: both workers' two links, in the order printed.
  static std::vector<std::string> links_run(const testing::ProcessResult& r) {
    std::vector<std::string> algorithms;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      if (!testing::first_match(line, R"(worker=[01]: transport to )")) continue;
      for (const auto& link :
           testing::all_matches(line, R"(tcp \(congestion control ([a-z0-9_]+)\))"))
        algorithms.push_back(link[1]);
    }
    return algorithms;
  }

  std::optional<testing::VirtualNetwork> network_;
};

TEST_F(TcpCongestionOnAHostOfItsOwn, AutoIsCubicForAProcessThatMaySetAnyAlgorithm) {
  const std::string expected =
      lists(host_setting("tcp_available_congestion_control"), "cubic") ? "cubic" : kHostsOwn;
  const testing::ProcessResult r = train(kTcpCongestionAuto, /*net_admin=*/true);
  ASSERT_EQ(r.exit_code, 0) << testing::all_output(r);
  EXPECT_EQ(links_run(r), std::vector<std::string>(4, expected)) << r.out;
}

TEST_F(TcpCongestionOnAHostOfItsOwn, AutoWithoutCapNetAdminIsCubicOnlyWhereAllowedElseTheHostsOwn) {
  const std::string allowed = host_setting("tcp_allowed_congestion_control");
  const std::string expected = lists(allowed, "cubic") ? "cubic" : kHostsOwn;
  const testing::ProcessResult r = train(kTcpCongestionAuto, /*net_admin=*/false);
  ASSERT_EQ(r.exit_code, 0) << testing::all_output(r);
  EXPECT_EQ(links_run(r), std::vector<std::string>(4, expected)) << r.out;
  // Asked for by name, cubic is what the process may set, or refused at start naming the list.
  const testing::ProcessResult named = train("cubic", /*net_admin=*/false);
  if (lists(allowed, "cubic")) {
    ASSERT_EQ(named.exit_code, 0) << testing::all_output(named);
    EXPECT_EQ(links_run(named), std::vector<std::string>(4, "cubic")) << named.out;
  } else {
    EXPECT_EQ(named.exit_code, 2) << testing::all_output(named);
    EXPECT_THAT(named.err, HasSubstr("--tcp_congestion cubic: this host does not offer TCP "
                                     "congestion control 'cubic' to dtrain"));
    EXPECT_THAT(named.err, HasSubstr("it allows: " + allowed));
  }
}

TEST_F(TcpCongestionOnAHostOfItsOwn, HostIsTheNamespacesOwnWithOrWithoutCapNetAdmin) {
  for (const bool net_admin : {true, false}) {
    const testing::ProcessResult r = train(kTcpCongestionHost, net_admin);
    ASSERT_EQ(r.exit_code, 0) << testing::all_output(r);
    EXPECT_EQ(links_run(r), std::vector<std::string>(4, kHostsOwn))
        << "CAP_NET_ADMIN " << net_admin << "\n"
        << r.out;
  }
}

}  // namespace
}  // namespace dtrain
