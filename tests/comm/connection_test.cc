// Connection over real loopback sockets: frames arrive bit-exact in the caller's buffers, errors
// name the peer, a failed connection stays failed, and a dead or silent peer is an error within
// the configured time, never a hang.
#include "comm/connection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <future>
#include <random>
#include <string>
#include <vector>

#include "comm/connect.h"
#include "comm/loopback.h"

namespace dtrain {
namespace {

using ::testing::AllOf;
using testing::client_options;
using testing::connect_to;
using testing::echo;
using testing::expect_echo_works;
using testing::free_port;
using ::testing::HasSubstr;
using testing::kEchoType;
using testing::kLoopbackSecret;
using testing::kPatience;
using testing::loopback_options;
using testing::RawPeer;

// Floats with arbitrary bit patterns, NaNs and denormals included: the transport must not care.
std::vector<float> random_bits(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> bits(count);
  for (auto& b : bits) b = rng();
  std::vector<float> values(count);
  if (count > 0) std::memcpy(values.data(), bits.data(), count * sizeof(float));
  return values;
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

TEST(Connection, EchoesAMebibyteTensorBitExactStraightIntoTheCallersBuffers) {
  Server server(loopback_options(), echo);
  auto client = connect_to(server);

  const auto big = random_bits((1 << 20) / sizeof(float), 1);
  const auto small = random_bits(5, 2);
  const std::vector<float> none;
  const std::span<const float> out[] = {big, none, small};
  const std::vector<std::byte> meta = {std::byte{1}, std::byte{2}, std::byte{3}};
  client->send(kEchoType, 7, meta, out);

  const auto in = client->receive();
  EXPECT_EQ(in.type, kEchoType);
  EXPECT_EQ(in.request_id, 7u);
  EXPECT_TRUE(std::equal(in.meta.begin(), in.meta.end(), meta.begin(), meta.end()));
  ASSERT_EQ(in.tensor_bytes, (big.size() + small.size()) * sizeof(float));
  std::vector<float> big_back(big.size());
  std::vector<float> small_back(small.size());
  const std::span<float> into[] = {big_back, {}, small_back};
  client->receive_tensors(into);
  EXPECT_TRUE(same_bits(big_back, big));
  EXPECT_TRUE(same_bits(small_back, small));
}

TEST(Connection, CarriesEmptyMetaAndZeroLengthTensors) {
  Server server(loopback_options(), echo);
  auto client = connect_to(server);
  const std::vector<float> none;
  const std::span<const float> out[] = {none, none};
  client->send(kEchoType, 1, {}, out);
  const auto in = client->receive();
  EXPECT_TRUE(in.meta.empty());
  EXPECT_EQ(in.tensor_bytes, 0u);
  client->send(kEchoType, 2, {}, {});  // no receive_tensors needed after a tensor-less frame
  EXPECT_EQ(client->receive().request_id, 2u);
  expect_echo_works(*client);
}

TEST(Connection, ManyFramesOfVaryingSizesStayInStepAndDiscardingKeepsTheStream) {
  // The server discards the tensors of odd requests and echoes even ones.
  Server server(loopback_options(), [](Connection& connection) {
    std::vector<float> buffer;
    for (;;) {
      const auto in = connection.receive();
      buffer.resize(in.tensor_bytes / sizeof(float));
      if (in.request_id % 2 == 1) {
        connection.discard_tensors();
        buffer.clear();
      } else {
        const std::span<float> into[] = {buffer};
        connection.receive_tensors(into);
      }
      const std::span<const float> out[] = {buffer};
      connection.send(in.type, in.request_id, {}, out);
    }
  });
  auto client = connect_to(server);
  for (uint64_t id = 0; id < 40; ++id) {
    const auto values = random_bits(id * id * 97, static_cast<uint32_t>(id));
    const std::span<const float> out[] = {values};
    client->send(kEchoType, id, {}, out);
    const auto in = client->receive();
    ASSERT_EQ(in.request_id, id);
    std::vector<float> back(in.tensor_bytes / sizeof(float));
    const std::span<float> into[] = {back};
    client->receive_tensors(into);
    EXPECT_TRUE(same_bits(back, id % 2 == 1 ? std::span<const float>() : values)) << id;
  }
}

TEST(Connection, SenderAndReceiverThreadsRunAtOnce) {
  // More data in flight than the socket buffers hold: it flows only because one thread sends
  // while another receives.
  Server server(loopback_options(), echo);
  auto client = connect_to(server);
  constexpr int kFrames = 32;
  const auto values = random_bits((1 << 20) / sizeof(float), 3);
  auto sender = std::async(std::launch::async, [&] {
    for (int i = 0; i < kFrames; ++i) {
      const std::span<const float> out[] = {values};
      client->send(kEchoType, i, {}, out);
    }
  });
  std::vector<float> back(values.size());
  for (int i = 0; i < kFrames; ++i) {
    const auto in = client->receive();
    ASSERT_EQ(in.request_id, static_cast<uint64_t>(i));
    const std::span<float> into[] = {back};
    client->receive_tensors(into);
    ASSERT_TRUE(same_bits(back, values));
  }
  sender.get();
}

TEST(Connection, WrongTensorSizesAreAFrameErrorAndTheConnectionStaysFailed) {
  Server server(loopback_options(), echo);
  auto client = connect_to(server);
  const std::vector<float> three = {1, 2, 3};
  const std::span<const float> out[] = {three};
  client->send(kEchoType, 5, {}, out);
  client->receive();
  std::vector<float> two(2);
  const std::span<float> into[] = {two};
  EXPECT_THAT([&] { client->receive_tensors(into); },
              ::testing::ThrowsMessage<FrameError>(
                  AllOf(HasSubstr("from ps0 (127.0.0.1:"),
                        HasSubstr("carries 12 tensor bytes, but the receiver expected 8"))));
  EXPECT_FALSE(client->is_open());
  // Every later call, in either direction, rethrows the first error.
  EXPECT_THAT([&] { client->send(kEchoType, 6, {}, out); },
              ::testing::ThrowsMessage<FrameError>(HasSubstr("carries 12 tensor bytes")));
  EXPECT_THAT([&] { client->receive(); },
              ::testing::ThrowsMessage<FrameError>(HasSubstr("carries 12 tensor bytes")));
}

TEST(Connection, ReservedTypesAreRefusedBeforeSending) {
  Server server(loopback_options(), echo);
  auto client = connect_to(server);
  EXPECT_THROW(client->send(frame_format::kTypeAuthOk, 0, {}, {}), std::invalid_argument);
  expect_echo_works(*client);  // a broken precondition does not close the connection
}

TEST(Connection, ConnectingWhereNothingListensNamesTheAddressWithinTheBoundedWait) {
  const uint16_t port = free_port();
  auto options = client_options();
  options.connect_timeout_ms = 500;
  const auto start = SteadyClock::now();
  EXPECT_THAT(
      [&] { connect("127.0.0.1", port, kLoopbackSecret, options); },
      ::testing::ThrowsMessage<TransportError>(
          AllOf(HasSubstr(fmt::format("could not reach ps0 at 127.0.0.1:{} within 0.5 s (", port)),
                HasSubstr("attempts): Connection refused"))));
  EXPECT_LT(SteadyClock::now() - start, kPatience);
}

TEST(Connection, AConnectStillWaitingSaysWhomWhereWhyAndTheTimeLeft) {
  const uint16_t port = free_port();
  auto options = client_options();
  options.connect_timeout_ms = 600;
  options.wait_report_interval_ms = 100;
  std::vector<std::string> lines;
  options.wait_report = [&lines](const std::string& line) { lines.push_back(line); };
  EXPECT_THROW(connect("127.0.0.1", port, kLoopbackSecret, options), TransportError);
  ASSERT_FALSE(lines.empty());
  EXPECT_THAT(lines.front(), ::testing::MatchesRegex(fmt::format(
                                 "still waiting for ps0 at 127\\.0\\.0\\.1:{} \\(Connection "
                                 "refused\\); [0-9]+ s left",
                                 port)));
}

TEST(Connection, AStopRequestEndsAConnectThatIsWaiting) {
  const uint16_t port = free_port();
  auto options = client_options();
  options.connect_timeout_ms = static_cast<int>(kPatience.count());
  options.wait_report_interval_ms = 50;
  StopRequest stop;
  options.stop = &stop;
  // The signal arrives while connect() waits: at its first line.
  options.wait_report = [&stop](const std::string&) { stop.request(SIGTERM); };
  EXPECT_THAT([&] { connect("127.0.0.1", port, kLoopbackSecret, options); },
              ::testing::ThrowsMessage<StopRequested>(HasSubstr(
                  fmt::format("stopped by SIGTERM while waiting for ps0 at 127.0.0.1:{}", port))));
}

TEST(Connection, ConnectRetriesUntilTheServerComesUp) {
  const uint16_t port = free_port();
  auto options = client_options();
  options.connect_timeout_ms = static_cast<int>(kPatience.count());
  auto client = std::async(std::launch::async,
                           [&] { return connect("127.0.0.1", port, kLoopbackSecret, options); });
  // The client is retrying against a closed port; now the server starts there.
  auto server_options = loopback_options();
  server_options.port = port;
  Server server(server_options, echo);
  auto connection = client.get();
  expect_echo_works(*connection);
}

TEST(Connection, PeerHangingUpBetweenFramesIsATransportErrorNamingIt) {
  Server server(loopback_options(), [](Connection& connection) {
    connection.receive();  // then return without answering: the server closes the connection
  });
  auto client = connect_to(server);
  client->send(kEchoType, 1, {}, {});
  EXPECT_THAT([&] { client->receive(); },
              ::testing::ThrowsMessage<TransportError>(
                  AllOf(HasSubstr("ps0 (127.0.0.1:"), HasSubstr("closed the connection"))));
  EXPECT_TRUE(client->closed_by_peer());
}

TEST(Connection, SilentPeerTimesOutNamingIt) {
  std::promise<void> release;
  auto released = release.get_future().share();
  Server server(loopback_options(), [released](Connection& connection) {
    connection.receive();
    released.wait_for(kPatience);  // never answers
  });
  auto options = client_options();
  options.idle_timeout_ms = 200;
  auto client = connect("127.0.0.1", server.port(), kLoopbackSecret, options);
  client->send(kEchoType, 1, {}, {});
  EXPECT_THAT([&] { client->receive(); }, ::testing::ThrowsMessage<TransportError>(HasSubstr(
                                              "timed out: no data from ps0 (127.0.0.1:")));
  release.set_value();
}

// The server's side of a frame cut short: what the handler's receive_tensors threw.
class ConnectionCutShortFrame : public ::testing::Test {
 protected:
  ConnectionCutShortFrame() {
    auto options = loopback_options();
    options.connection.io_timeout_ms = 300;
    server_ = std::make_unique<Server>(options, [this](Connection& connection) {
      const auto in = connection.receive();
      std::vector<float> into(in.tensor_bytes / sizeof(float));
      const std::span<float> spans[] = {into};
      try {
        connection.receive_tensors(spans);
        error_.set_value("no error");
      } catch (const TransportError& error) {
        error_.set_value(error.what());
        throw;
      }
    });
  }

  // Authenticates and sends the first 1000 bytes of a frame carrying a 1 MiB tensor.
  std::unique_ptr<RawPeer> send_partial_frame() {
    auto peer = std::make_unique<RawPeer>(server_->port());
    peer->authenticate(kLoopbackSecret);
    const std::vector<float> values((1 << 20) / sizeof(float), 1.0f);
    const std::span<const float> tensors[] = {values};
    const auto frame = peer->seal(encode_frame(kEchoType, 1, {}, tensors));
    peer->write(std::span(frame).first(1000));
    return peer;
  }

  std::string handler_error() {
    auto future = error_.get_future();
    if (future.wait_for(kPatience) != std::future_status::ready) return "the handler hung";
    return future.get();
  }

  std::promise<std::string> error_;
  std::unique_ptr<Server> server_;
};

TEST_F(ConnectionCutShortFrame, PeerVanishingMidFrameIsATransportError) {
  send_partial_frame().reset();  // the peer process dies: its socket closes
  EXPECT_THAT(handler_error(), AllOf(HasSubstr("127.0.0.1:"),
                                     HasSubstr("closed the connection in the middle of a frame")));
}

TEST_F(ConnectionCutShortFrame, PeerStallingMidFrameTimesOut) {
  auto peer = send_partial_frame();  // alive, but sends nothing more
  EXPECT_THAT(handler_error(), HasSubstr("timed out: no data from 127.0.0.1:"));
  EXPECT_TRUE(server_->wait_for([](const ServerStats& s) { return s.failed == 1; }, kPatience));
}

TEST(Connection, CloseWakesABlockedReceiver) {
  Server server(loopback_options(), echo);
  auto client = connect_to(server);
  auto receiver = std::async(std::launch::async, [&] { client->receive(); });
  client->close();
  EXPECT_THAT([&] { receiver.get(); },
              ::testing::ThrowsMessage<TransportError>(HasSubstr("was closed locally")));
}

}  // namespace
}  // namespace dtrain
