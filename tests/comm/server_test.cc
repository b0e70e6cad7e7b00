// Server over real loopback sockets: every kind of bad peer is closed with a logged reason that
// names its address, and the server goes on serving everyone else.
#include "comm/server.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "comm/connect.h"
#include "comm/frame.h"
#include "comm/loopback.h"

namespace dtrain {
namespace {

using ::testing::AllOf;
using testing::connect_to;
using testing::echo;
using testing::expect_echo_works;
using ::testing::HasSubstr;
using testing::kEchoType;
using testing::kLoopbackSecret;
using testing::kPatience;
using testing::LogCapture;
using testing::loopback_options;
using testing::RawPeer;

bool wait_for_rejected(const Server& server, uint64_t n) {
  return server.wait_for([n](const ServerStats& s) { return s.rejected == n; }, kPatience);
}

bool wait_for_failed(const Server& server, uint64_t n) {
  return server.wait_for([n](const ServerStats& s) { return s.failed == n; }, kPatience);
}

std::span<const std::byte> bytes_of(std::string_view text) {
  return std::as_bytes(std::span(text));
}

TEST(Server, PortZeroPicksAFreePort) {
  Server a(loopback_options(), echo);
  Server b(loopback_options(), echo);
  EXPECT_NE(a.port(), 0);
  EXPECT_NE(b.port(), 0);
  EXPECT_NE(a.port(), b.port());
}

TEST(Server, EmptySecretIsAUsageError) {
  auto options = loopback_options();
  options.secret.clear();
  EXPECT_THROW(Server(options, echo), UsageError);
}

TEST(Server, ListeningOnATakenPortNamesIt) {
  Server first(loopback_options(), echo);
  auto options = loopback_options();
  options.port = first.port();
  // SO_REUSEADDR does not let two sockets listen on one port.
  EXPECT_THAT([&] { Server second(options, echo); },
              ::testing::ThrowsMessage<TransportError>(
                  HasSubstr(fmt::format("cannot listen on 127.0.0.1:{}", first.port()))));
}

TEST(Server, WrongSecretIsAnAuthErrorAtTheClientAndTheServerKeepsServing) {
  LogCapture log;
  Server server(loopback_options(), echo);
  EXPECT_THAT([&] { connect_to(server, "not the cluster secret"); },
              ::testing::ThrowsMessage<AuthError>(
                  AllOf(HasSubstr("ps0 (127.0.0.1:"), HasSubstr("wrong cluster secret"))));
  ASSERT_TRUE(wait_for_rejected(server, 1));
  EXPECT_THAT(log.text(), AllOf(HasSubstr("rejected connection: 127.0.0.1:"),
                                HasSubstr("failed authentication (wrong cluster secret)")));
  auto honest = connect_to(server);
  expect_echo_works(*honest);
  EXPECT_EQ(server.stats().authenticated, 1u);
}

TEST(Server, GarbageBeforeAuthenticationIsRejectedAndNothingMoreIsRead) {
  LogCapture log;
  Server server(loopback_options(), echo);
  auto honest = connect_to(server);
  RawPeer stray(server.port());
  stray.write(bytes_of("GET / HTTP/1.1\r\nHost: ps0\r\n\r\n"));
  EXPECT_TRUE(stray.closed_by_other_side());
  ASSERT_TRUE(wait_for_rejected(server, 1));
  EXPECT_THAT(log.text(), AllOf(HasSubstr("rejected connection: bad frame from 127.0.0.1:"),
                                HasSubstr("bad magic 0x20544547 (\"GET \")")));
  expect_echo_works(*honest);
  expect_echo_works(*connect_to(server));
}

// A task of the previous dtrain build (frame version 5: its ring chunks and pushes name no element
// type) says hello: it is turned away at that first frame, and the log names both versions rather
// than a field the two builds read differently.
TEST(Server, APeerOfAnotherBuildIsRejectedNamingBothFrameVersions) {
  LogCapture log;
  Server server(loopback_options(), echo);
  FrameHeader header;
  header.version = 5;
  header.type = frame_format::kTypeHello;
  header.payload_len = frame_format::kMetaLenBytes;
  std::array<std::byte, frame_format::kHeaderBytes> hello{};
  encode_header(header, hello);
  RawPeer older(server.port());
  older.write(hello);
  EXPECT_TRUE(older.closed_by_other_side());
  ASSERT_TRUE(wait_for_rejected(server, 1));
  EXPECT_THAT(log.text(),
              AllOf(HasSubstr("rejected connection: bad frame from 127.0.0.1:"),
                    HasSubstr("unsupported frame version 5, this build speaks version 6")));
  expect_echo_works(*connect_to(server));
}

TEST(Server, SilentPeerIsRejectedAtTheHandshakeDeadline) {
  LogCapture log;
  auto options = loopback_options();
  options.connection.handshake_timeout_ms = 200;
  Server server(options, echo);
  RawPeer silent(server.port());
  EXPECT_TRUE(silent.closed_by_other_side());
  ASSERT_TRUE(wait_for_rejected(server, 1));
  EXPECT_THAT(log.text(),
              HasSubstr("rejected connection: timed out waiting for data from 127.0.0.1:"));
  expect_echo_works(*connect_to(server));
}

TEST(Server, PeerWithTheWrongProofIsToldAndRejected) {
  LogCapture log;
  Server server(loopback_options(), echo);
  RawPeer forger(server.port());
  const Nonce nonce = random_nonce();
  std::vector<std::byte> hello(nonce.begin(), nonce.end());
  const auto params = encode_params(HandshakeParams{});
  hello.insert(hello.end(), params.begin(), params.end());
  forger.write(encode_frame(frame_format::kTypeHello, 0, hello, {}));
  forger.read_frame();  // the challenge
  const std::array<std::byte, kProofBytes + kProcessSignatureBytes> guess{};
  forger.write(encode_frame(frame_format::kTypeProof, 0, guess, {}));
  const auto answer = forger.read_frame();
  EXPECT_EQ(decode_frame(answer, 1024, 1024).header.type, frame_format::kTypeAuthFailed);
  EXPECT_TRUE(forger.closed_by_other_side());
  ASSERT_TRUE(wait_for_rejected(server, 1));
  EXPECT_THAT(log.text(), HasSubstr("its proof does not match our secret"));
}

// A client of `server` that says it is `identity`, from process `incarnation`.
std::unique_ptr<Connection> connect_as(const Server& server, const std::string& identity,
                                       uint64_t incarnation) {
  ConnectionOptions options = testing::client_options();
  options.identity = identity;
  options.incarnation = incarnation;
  return connect("127.0.0.1", server.port(), kLoopbackSecret, options);
}

TEST(Server, AnIdentityLiveInAnotherProcessIsRefusedNamingWhereItIsConnectedFrom) {
  LogCapture log;
  Server server(loopback_options(), echo);
  auto first = connect_as(server, "worker 1", 1);
  EXPECT_EQ(first->peer_identity(), "");  // the server says nothing of itself here
  EXPECT_THAT([&] { connect_as(server, "worker 1", 2); },
              ::testing::ThrowsMessage<AuthError>(
                  HasSubstr("refused this connection: worker 1 is already connected from "
                            "127.0.0.1:")));
  ASSERT_TRUE(wait_for_rejected(server, 1));
  EXPECT_THAT(log.text(), HasSubstr("worker 1 is already connected from 127.0.0.1:"));
  // The same process again (a reconnection whose old connection may not look dead yet), another
  // identity, and a client without one are all let in.
  auto again = connect_as(server, "worker 1", 1);
  auto other = connect_as(server, "worker 2", 2);
  auto tool = connect_as(server, "", 2);
  expect_echo_works(*again);
  expect_echo_works(*first);
  // Once the first process's connections are gone, another process may be worker 1.
  first.reset();
  again.reset();
  ASSERT_TRUE(server.wait_for([](const ServerStats& s) { return s.finished == 2; }, kPatience));
  expect_echo_works(*connect_as(server, "worker 1", 3));
}

// What a process says of itself travels in clear; what it proves does not. A process holding the
// cluster secret that copies a live connection's process key, to pass for that process, cannot
// sign with it and is refused.
TEST(Server, ACopiedProcessKeyIsRefusedForWantOfItsPrivateHalf) {
  LogCapture log;
  Server server(loopback_options(), echo);
  auto first = connect_as(server, "worker 1", 1);
  const ProcessPublicKey copied = ProcessKey::from_seed(1).public_key();
  RawPeer impostor(server.port());
  EXPECT_EQ(impostor.handshake(kLoopbackSecret, true, "worker 1", &copied),
            frame_format::kTypeAuthFailed);
  ASSERT_TRUE(wait_for_rejected(server, 1));
  EXPECT_THAT(log.text(), HasSubstr("did not prove it is the process it says it is"));
  // Its own key it can prove; then it is another process, refused while worker 1 is connected.
  RawPeer itself(server.port());
  EXPECT_EQ(itself.handshake(kLoopbackSecret, true, "worker 1"), frame_format::kTypeRefused);
  expect_echo_works(*first);
}

TEST(Server, AlteredFrameFailsAuthenticationAndClosesThatConnectionOnly) {
  LogCapture log;
  Server server(loopback_options(), echo);
  auto honest = connect_to(server);
  RawPeer corrupter(server.port());
  corrupter.authenticate(kLoopbackSecret);
  const std::vector<float> values(1000, 0.5f);
  const std::span<const float> tensors[] = {values};
  corrupter.write(corrupter.seal(encode_frame(kEchoType, 1, {}, tensors)));
  EXPECT_EQ(corrupter.read_tagged_frame().size(),
            frame_format::kHeaderBytes + frame_format::kMetaLenBytes + 4000);  // the echo
  auto frame = corrupter.seal(encode_frame(kEchoType, 2, {}, tensors));
  frame[frame.size() - 100] ^= std::byte{0x10};  // one bit of one float
  corrupter.write(frame);
  EXPECT_TRUE(corrupter.closed_by_other_side());
  ASSERT_TRUE(wait_for_failed(server, 1));
  EXPECT_THAT(log.text(), AllOf(HasSubstr("closed connection: frame 1 from 127.0.0.1:"),
                                HasSubstr("failed authentication")));
  expect_echo_works(*honest);
  expect_echo_works(*connect_to(server));
}

// A handler that counts the frames it is given and acts on none.
Server::Handler counting(std::atomic<int>& frames) {
  return [&frames](Connection& connection) {
    for (;;) {
      connection.receive();
      ++frames;
      connection.discard_tensors();
    }
  };
}

TEST(Server, AFrameWhoseOpeningWasAlteredIsRefusedByItsTagBeforeTheHandlerSeesIt) {
  LogCapture log;
  std::atomic<int> frames = 0;
  Server server(loopback_options(), counting(frames));
  RawPeer forger(server.port());
  forger.authenticate(kLoopbackSecret);
  const std::vector<float> values(4, 0.5f);
  const std::span<const float> tensors[] = {values};
  const std::byte meta[] = {std::byte{1}, std::byte{2}, std::byte{3}};
  auto frame = forger.seal(encode_frame(kEchoType, 1, meta, tensors));
  frame[frame_format::kHeaderBytes + frame_format::kMetaLenBytes] ^= std::byte{0x01};
  forger.write(frame);
  EXPECT_TRUE(forger.closed_by_other_side());
  ASSERT_TRUE(wait_for_failed(server, 1));
  EXPECT_EQ(frames, 0);
  EXPECT_THAT(log.text(), AllOf(HasSubstr("closed connection: frame 0 from 127.0.0.1:"),
                                HasSubstr("failed authentication (its header and meta, claiming "
                                          "type")));
}

TEST(Server, AFrameOfATypeWithoutTensorsThatDeclaresSomeIsRefusedUnhandled) {
  LogCapture log;
  std::atomic<int> frames = 0;
  auto options = loopback_options();
  options.connection.type_carries_tensors = [](uint16_t type) { return type == kEchoType; };
  Server server(options, counting(frames));
  RawPeer sender(server.port());
  sender.authenticate(kLoopbackSecret);
  const std::vector<float> values(4, 0.5f);
  const std::span<const float> tensors[] = {values};
  sender.write(sender.seal(encode_frame(kEchoType, 1, {}, tensors)));
  sender.write(sender.seal(encode_frame(kEchoType + 1, 2, {}, tensors)));
  EXPECT_TRUE(sender.closed_by_other_side());
  ASSERT_TRUE(wait_for_failed(server, 1));
  EXPECT_EQ(frames, 1);
  EXPECT_THAT(log.text(), HasSubstr(fmt::format("type {} (request 2) carries no tensors, but this "
                                                "one declares 16 tensor bytes",
                                                kEchoType + 1)));
}

TEST(Server, BadCrcClosesThatConnectionOnlyWhereFramesAreNotAuthenticated) {
  LogCapture log;
  auto options = loopback_options();
  options.connection.authenticate_frames = false;
  Server server(options, echo);
  RawPeer corrupter(server.port());
  corrupter.authenticate(kLoopbackSecret, /*authenticate_frames=*/false);
  const std::vector<float> values(1000, 0.5f);
  const std::span<const float> tensors[] = {values};
  auto frame = encode_frame(kEchoType, 1, {}, tensors);
  frame[frame.size() - 100] ^= std::byte{0x10};  // one bit of one float
  corrupter.write(frame);
  EXPECT_TRUE(corrupter.closed_by_other_side());
  ASSERT_TRUE(wait_for_failed(server, 1));
  EXPECT_THAT(log.text(), HasSubstr("closed connection: bad CRC32C from 127.0.0.1:"));
}

TEST(Server, OversizeFrameClosesThatConnectionBeforeReadingItsPayload) {
  LogCapture log;
  auto options = loopback_options();
  options.connection.max_payload_bytes = 1 << 20;
  Server server(options, echo);
  auto honest = connect_to(server);
  RawPeer hog(server.port());
  hog.authenticate(kLoopbackSecret);
  std::array<std::byte, frame_format::kHeaderBytes> header;
  encode_header({.type = kEchoType, .payload_len = uint64_t{1} << 40}, header);
  hog.write(header);  // announces a terabyte; a server that tried to allocate it would fail
  EXPECT_TRUE(hog.closed_by_other_side());
  ASSERT_TRUE(wait_for_failed(server, 1));
  EXPECT_THAT(log.text(),
              AllOf(HasSubstr("closed connection: bad frame from 127.0.0.1:"),
                    HasSubstr("1099511627776-byte payload, over the 1048576-byte limit")));
  expect_echo_works(*honest);
}

TEST(Server, HandshakeFrameAfterAuthenticationClosesThatConnection) {
  LogCapture log;
  Server server(loopback_options(), echo);
  RawPeer peer(server.port());
  peer.authenticate(kLoopbackSecret);
  peer.write(encode_frame(frame_format::kTypeHello, 0, random_nonce(), {}));
  EXPECT_TRUE(peer.closed_by_other_side());
  ASSERT_TRUE(wait_for_failed(server, 1));
  EXPECT_THAT(log.text(), HasSubstr("type 1 is reserved for the handshake"));
}

TEST(Server, UnknownTypeRefusedByTheHandlerClosesThatConnectionOnly) {
  LogCapture log;
  Server server(loopback_options(), [](Connection& connection) {
    for (;;) {
      const auto in = connection.receive();
      if (in.type != kEchoType) {
        throw FrameError(fmt::format("unknown frame type {} from {}", in.type, connection.peer()));
      }
      connection.discard_tensors();
      connection.send(in.type, in.request_id, {}, {});
    }
  });
  auto honest = connect_to(server);
  auto confused = connect_to(server);
  confused->send(99, 1, {}, {});
  EXPECT_THROW(confused->receive(), TransportError);
  ASSERT_TRUE(wait_for_failed(server, 1));
  EXPECT_THAT(log.text(), HasSubstr("closed connection: unknown frame type 99 from 127.0.0.1:"));
  honest->send(kEchoType, 2, {}, {});
  EXPECT_EQ(honest->receive().request_id, 2u);
}

// Peers that never authenticate cost the server a thread and a descriptor each until their
// handshake deadline; beyond the cap the oldest is dropped, so they cannot crowd out a real one.
TEST(Server, TheOldestOfTooManyPeersStillAuthenticatingIsDroppedAndCounted) {
  ServerOptions options = loopback_options();
  options.max_unauthenticated = 2;
  Server server(options, echo);
  std::vector<std::unique_ptr<RawPeer>> silent;
  for (uint64_t i = 1; i <= 3; ++i) {
    silent.push_back(std::make_unique<RawPeer>(server.port()));
    ASSERT_TRUE(server.wait_for([&](const ServerStats& s) { return s.accepted == i; }, kPatience));
  }
  EXPECT_EQ(server.stats().shed, 1u);
  EXPECT_TRUE(silent[0]->closed_by_other_side()) << "the oldest was dropped";
  ASSERT_TRUE(server.wait_for([](const ServerStats& s) { return s.rejected == 1; }, kPatience));

  auto honest = connect_to(server);  // the newest: one more of the silent ones makes room
  expect_echo_works(*honest);
  EXPECT_EQ(server.stats().shed, 2u);
  EXPECT_TRUE(silent[1]->closed_by_other_side());
}

// This process's open descriptors, from the kernel's list.
int descriptors_of_this_process() {
  return static_cast<int>(std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                                        std::filesystem::directory_iterator{}));
}

// What a flood takes from the server is descriptors: a dropped peer's must be free again by the
// time the next peer is in, not whenever its socket is next looked at.
TEST(Server, ADroppedPeersDescriptorIsClosedBeforeTheNextPeerIsCounted) {
  ServerOptions options = loopback_options();
  options.max_unauthenticated = 2;
  Server server(options, echo);
  const int before = descriptors_of_this_process();
  std::vector<std::unique_ptr<RawPeer>> silent;
  for (uint64_t i = 1; i <= 20; ++i) {
    silent.push_back(std::make_unique<RawPeer>(server.port()));
    ASSERT_TRUE(server.wait_for([&](const ServerStats& s) { return s.accepted == i; }, kPatience));
    // Every silent peer's own end is in this process too; of the server's ends, two are left.
    EXPECT_LE(descriptors_of_this_process(), before + static_cast<int>(i) + 2) << "peer " << i;
  }
  EXPECT_EQ(server.stats().shed, 18u);
  EXPECT_EQ(server.stats().rejected, 18u);
}

// This process's threads, from the kernel's count.
int threads_of_this_process() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

TEST(Server, PeersStillAuthenticatingCostNoThread) {
  ServerOptions options = loopback_options();
  options.max_unauthenticated = 64;
  Server server(options, echo);
  expect_echo_works(*connect_to(server));  // one handshake done: every thread the server keeps runs
  ASSERT_TRUE(server.wait_for([](const ServerStats& s) { return s.finished == 1; }, kPatience));
  const int before = threads_of_this_process();
  std::vector<std::unique_ptr<RawPeer>> silent;
  for (int i = 0; i < 40; ++i) silent.push_back(std::make_unique<RawPeer>(server.port()));
  ASSERT_TRUE(server.wait_for([](const ServerStats& s) { return s.accepted == 41; }, kPatience));
  // (At most: the first handshake's handler thread may still have been on its way out.)
  EXPECT_LE(threads_of_this_process(), before);
  // And they hold up no one: a handshake goes through among them.
  expect_echo_works(*connect_to(server));
}

TEST(Server, ClientHangingUpIsANormalEnd) {
  Server server(loopback_options(), echo);
  connect_to(server)->close();
  EXPECT_TRUE(server.wait_for([](const ServerStats& s) { return s.finished == 1; }, kPatience));
  EXPECT_EQ(server.stats().failed, 0u);
}

TEST(Server, StopClosesLiveConnectionsAndJoinsEveryThread) {
  auto server = std::make_unique<Server>(loopback_options(), echo);
  auto a = connect_to(*server);
  auto b = connect_to(*server);
  expect_echo_works(*a);
  ASSERT_TRUE(
      server->wait_for([](const ServerStats& s) { return s.authenticated == 2; }, kPatience));
  server->stop();  // returns only once every handler, blocked in receive(), has been woken
  EXPECT_THROW(a->receive(), TransportError);
  EXPECT_THROW(b->receive(), TransportError);
  server.reset();
}

}  // namespace
}  // namespace dtrain
