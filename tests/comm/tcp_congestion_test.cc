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
#include <string>

#include "comm/loopback.h"

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

// Connects a client given `client_choice` to a server given `server_choice`; returns what the
// client's socket and the server's accepted socket run.
std::pair<std::string, std::string> connect_with(const std::string& server_choice,
                                                 const std::string& client_choice) {
  std::promise<std::string> accepted;
  std::future<std::string> accepted_algorithm = accepted.get_future();
  ServerOptions options = testing::loopback_options();
  options.connection.tcp_congestion = server_choice;
  Server server(options, [&accepted](Connection& connection) {
    accepted.set_value(algorithm_of(connection.stream().native_handle()));
    connection.receive();  // until the client closes
  });
  ConnectionOptions client = testing::client_options();
  client.tcp_congestion = client_choice;
  auto connection = connect("127.0.0.1", server.port(), testing::kLoopbackSecret, client);
  const std::string mine = algorithm_of(connection->stream().native_handle());
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

TEST(TcpCongestion, AutoIsCubicWhereTheHostAllowsItElseTheHostsOwn) {
  const std::string allowed = " " + host_setting("tcp_allowed_congestion_control") + " ";
  const std::string expected = allowed.find(" cubic ") != std::string::npos
                                   ? "cubic"
                                   : host_setting("tcp_congestion_control");
  const auto [client, server] =
      connect_with(std::string(kTcpCongestionAuto), std::string(kTcpCongestionAuto));
  EXPECT_EQ(client, expected);
  EXPECT_EQ(server, expected);
  EXPECT_EQ(tcp_congestion_in_use(kTcpCongestionAuto), expected);
  EXPECT_EQ(tcp_congestion_in_use("reno"), "reno");
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

}  // namespace
}  // namespace dtrain
