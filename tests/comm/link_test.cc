// The link step and payloads by reference under Connection (comm/link_setup.h,
// comm/memory_link.h): two processes of this host move frames with tensors bit for bit both ways,
// in the order they were sent, whichever way each frame goes, and into the landings a receiver
// offers; a reference outside the sender's memory and a mailbox whose counters make no sense are
// FrameErrors naming the peer; and --transport shm against a peer that cannot have it is refused
// on both sides, saying why.
#include <fcntl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <latch>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "comm/connect.h"
#include "comm/connection.h"
#include "comm/loopback.h"
#include "comm/server.h"
#include "comm/tcp_stream.h"
#include "comm/transport.h"
#include "support/mailbox_pages.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;
using testing::kLoopbackSecret;
using ::testing::ThrowsMessage;

constexpr uint16_t kFrameType = 20;

// Floats with every bit pattern a payload may hold: copies that go through a float register, or
// convert, would change some of them.
std::vector<float> bit_patterns(size_t n, uint32_t seed) {
  std::vector<float> values(n);
  uint32_t x = seed * 2654435761u + 1;
  for (float& v : values) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    std::memcpy(&v, &x, sizeof v);
  }
  return values;
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// A listening socket on loopback, made before a fork so that the child can accept on it.
struct Listener {
  int fd = -1;
  uint16_t port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        ::listen(fd, 1) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      throw std::runtime_error("could not listen on loopback");
    }
    port = ntohs(address.sin_port);
  }
  ~Listener() {
    if (fd >= 0) ::close(fd);
  }
};

// The child's side: accepts one connection, authenticates it as a server under `transport`, and
// sends every frame back (the same type, request id and meta, its tensors as one), until the
// connection ends. Blocking calls only, and no thread: it runs in a forked child.
[[noreturn]] void echo_child(int listen_fd, Transport transport) {
  try {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) _exit(3);
    ConnectionOptions options;
    options.identity = "ps 0";
    options.transport = transport;
    options.io_timeout_ms = 10'000;
    Connection connection(std::make_unique<TcpStream>(fd, "parent"), options);
    connection.handshake_as_server(kLoopbackSecret);
    testing::echo(connection);
  } catch (const TransportError&) {
    _exit(0);  // the parent closed the connection: done
  } catch (...) {
    _exit(4);
  }
}

class EchoChild {
 public:
  explicit EchoChild(Transport transport) {
    pid_ = fork();
    if (pid_ == 0) echo_child(listener_.fd, transport);
  }
  ~EchoChild() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  uint16_t port() const { return listener_.port; }
  void kill_now() {
    kill(pid_, SIGKILL);
    waitpid(std::exchange(pid_, -1), nullptr, 0);
  }
  // The child's exit status once the connection has ended.
  int wait() {
    int status = 0;
    waitpid(std::exchange(pid_, -1), &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  Listener listener_;
  pid_t pid_ = -1;
};

ConnectionOptions client_options(Transport transport) {
  ConnectionOptions options = testing::client_options();
  options.identity = "worker 1";
  options.transport = transport;
  options.io_timeout_ms = 10'000;
  return options;
}

// One frame out and its echo back: `tensors` sent, received into `into` as laid out there.
void round_trip(Connection& connection, uint64_t request_id, std::span<const std::byte> meta,
                std::span<const std::span<const float>> tensors,
                std::span<const std::span<float>> into) {
  connection.send(kFrameType, request_id, meta, tensors);
  const Connection::Incoming in = connection.receive();
  EXPECT_EQ(in.type, kFrameType);
  EXPECT_EQ(in.request_id, request_id);
  EXPECT_TRUE(std::equal(in.meta.begin(), in.meta.end(), meta.begin(), meta.end()));
  uint64_t bytes = 0;
  for (const auto t : tensors) bytes += t.size_bytes();
  ASSERT_EQ(in.tensor_bytes, bytes);
  connection.receive_tensors(into);
}

TEST(Link, ByReferenceMovesFramesWithTensorsBitForBitBothWaysBetweenTwoProcesses) {
  EchoChild child(Transport::kShm);
  const std::unique_ptr<Connection> connection =
      connect("127.0.0.1", child.port(), kLoopbackSecret, client_options(Transport::kShm));
  ASSERT_TRUE(connection->link_traits().in_memory);
  // A record (one tensor, small meta), a frame with a long meta and two tensors over the socket,
  // a frame without tensors, and a record again: each comes back in its turn, bit for bit, copied
  // out of the other process's memory each way.
  const std::vector<float> a = bit_patterns(1000, 1);
  const std::vector<float> b = bit_patterns(70'000, 2);
  const std::vector<float> c = bit_patterns(3, 3);
  const std::vector<std::byte> small_meta(16, std::byte{7});
  const std::vector<std::byte> long_meta(300, std::byte{9});
  for (uint64_t round = 0; round < 3; ++round) {
    std::vector<float> back_a(a.size());
    const std::span<const float> out_a[] = {a};
    const std::span<float> in_a[] = {back_a};
    round_trip(*connection, 10 * round + 1, small_meta, out_a, in_a);
    EXPECT_TRUE(same_bits(back_a, a)) << "round " << round;

    std::vector<float> back_bc(b.size() + c.size());
    const std::span<const float> out_bc[] = {b, c};
    const std::span<float> in_bc[] = {std::span(back_bc).first(b.size()),
                                      std::span(back_bc).subspan(b.size())};
    round_trip(*connection, 10 * round + 2, long_meta, out_bc, in_bc);
    EXPECT_TRUE(same_bits(std::span(back_bc).first(b.size()), b)) << "round " << round;
    EXPECT_TRUE(same_bits(std::span(back_bc).subspan(b.size()), c)) << "round " << round;

    round_trip(*connection, 10 * round + 3, long_meta, {}, {});
  }
  connection->close();
  EXPECT_EQ(child.wait(), 0);
}

// A receiver that offers a landing for its next tensor of a size has the peer write it there: the
// echo's bytes are in place when its frame arrives, before anything is copied on this side; a
// tensor of another size leaves the landing for the next one of its size; and a frame that landed
// read into another place is copied from where it landed.
TEST(Link, ATensorOfferedALandingIsWrittenThereByThePeerBeforeItsFrameArrives) {
  EchoChild child(Transport::kShm);
  const std::unique_ptr<Connection> connection =
      connect("127.0.0.1", child.port(), kLoopbackSecret, client_options(Transport::kShm));
  ASSERT_TRUE(connection->link_traits().in_memory);
  const std::vector<float> a = bit_patterns(1000, 5);
  const std::vector<float> other = bit_patterns(500, 6);
  const std::vector<std::byte> meta(16, std::byte{3});
  std::vector<float> landing(a.size(), 0.0f);
  const std::vector<float> untouched = landing;
  connection->offer_landing(landing);

  std::vector<float> back_other(other.size());
  const std::span<const float> out_other[] = {other};
  const std::span<float> in_other[] = {back_other};
  round_trip(*connection, 1, meta, out_other, in_other);
  EXPECT_TRUE(same_bits(back_other, other));
  EXPECT_TRUE(same_bits(landing, untouched)) << "a tensor of another size used the landing";

  const std::span<const float> out_a[] = {a};
  connection->send(kFrameType, 2, meta, out_a);
  const Connection::Incoming in = connection->receive();
  ASSERT_EQ(in.tensor_bytes, a.size() * sizeof(float));
  EXPECT_TRUE(same_bits(landing, a)) << "the echo was not written into the landing";
  const std::span<float> in_landing[] = {landing};
  connection->receive_tensors(in_landing);
  EXPECT_TRUE(same_bits(landing, a));

  std::vector<float> second(a.size(), 0.0f), elsewhere(a.size(), 0.0f);
  connection->offer_landing(second);
  const std::span<float> in_elsewhere[] = {elsewhere};
  round_trip(*connection, 3, meta, out_a, in_elsewhere);
  EXPECT_TRUE(same_bits(second, a));
  EXPECT_TRUE(same_bits(elsewhere, a));
  connection->close();
  EXPECT_EQ(child.wait(), 0);
}

// A peer whose process has gone while its tensors wait to be copied ends the connection as a peer
// that closed it does: the same error, and counted as a normal end, not a failure.
TEST(Link, APeerGoneBeforeItsTensorsAreCopiedEndsTheConnectionAsIfItHadClosedIt) {
  EchoChild child(Transport::kShm);
  const std::unique_ptr<Connection> connection =
      connect("127.0.0.1", child.port(), kLoopbackSecret, client_options(Transport::kShm));
  ASSERT_TRUE(connection->link_traits().in_memory);
  const std::vector<float> a = bit_patterns(1000, 7);
  const std::span<const float> out_a[] = {a};
  connection->send(kFrameType, 1, {}, out_a);
  const Connection::Incoming in = connection->receive();  // the echo, waiting in the child
  ASSERT_EQ(in.tensor_bytes, a.size() * sizeof(float));
  child.kill_now();
  std::vector<float> back(a.size());
  const std::span<float> into[] = {back};
  EXPECT_THAT([&] { connection->receive_tensors(into); },
              ThrowsMessage<TransportError>(HasSubstr("closed the connection")));
  EXPECT_TRUE(connection->closed_by_peer());
}

// One process plays both ends (a process can read its own memory, so the link goes by
// reference), the server's handler keeping what its first receive made of the client's frame.
class InProcessLink {
 public:
  InProcessLink() {
    ServerOptions options = testing::loopback_options();
    options.connection.transport = Transport::kAuto;
    options.connection.identity = "ps 0";
    server_ = std::make_unique<Server>(options, [this](Connection& connection) {
      try {
        const Connection::Incoming in = connection.receive();
        std::vector<float> into(in.tensor_bytes / sizeof(float));
        const std::span<float> spans[] = {into};
        connection.receive_tensors(spans);
        outcome_ = "received";
      } catch (const std::exception& error) {
        outcome_ = error.what();
      }
      done_.count_down();
    });
    client_ =
        connect("127.0.0.1", server_->port(), kLoopbackSecret, client_options(Transport::kAuto));
  }
  Connection& client() { return *client_; }
  // What the server's receive made of the frame.
  std::string outcome() {
    done_.wait();
    return outcome_;
  }

 private:
  std::latch done_{1};
  std::string outcome_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Connection> client_;
};

// Frames over the socket and records through the mailbox, alternating, all sent before the
// receiver looks: every record is in the mailbox before the first frame's bytes are read, yet the
// receiver hands them over in the order they were sent.
TEST(Link, FramesOverTheSocketAndRecordsThroughTheMailboxArriveInTheOrderSent) {
  constexpr uint64_t kPairs = 50;  // within the mailbox's slots and a socket's buffer
  std::vector<uint64_t> order;
  std::latch sent(1), done(1);
  ServerOptions options = testing::loopback_options();
  options.connection.transport = Transport::kAuto;
  std::string failure;
  Server server(options, [&](Connection& connection) {
    connection.receive();  // the first, after the link step
    sent.wait();
    std::vector<float> into(4);
    const std::span<float> spans[] = {into};
    try {
      for (uint64_t i = 0; i < 2 * kPairs; ++i) {
        const Connection::Incoming in = connection.receive();
        order.push_back(in.request_id);
        if (in.tensor_bytes > 0) connection.receive_tensors(spans);
      }
    } catch (const std::exception& error) {
      failure = error.what();
    }
    done.count_down();
    connection.receive();  // until the client hangs up
  });
  const auto client =
      connect("127.0.0.1", server.port(), kLoopbackSecret, client_options(Transport::kAuto));
  ASSERT_TRUE(client->link_traits().in_memory);
  client->send(kFrameType, 0, {}, {});
  const std::vector<float> values = {1, 2, 3, 4};
  const std::span<const float> tensors[] = {values};
  for (uint64_t i = 0; i < kPairs; ++i) {
    client->start_send(kFrameType, 2 * i, {}, {});  // no tensors: over the socket
    while (!client->continue_send()) {
    }
    client->start_send(kFrameType, 2 * i + 1, {}, tensors);  // a record
    while (!client->continue_send()) {
    }
  }
  sent.count_down();
  done.wait();
  ASSERT_EQ(failure, "");
  EXPECT_TRUE(client->sends_settled());
  ASSERT_EQ(order.size(), 2 * kPairs);
  for (uint64_t i = 0; i < order.size(); ++i) ASSERT_EQ(order[i], i) << "frame " << i;
}

TEST(Link, AReferenceOutsideTheSendersMemoryIsAFrameErrorNamingIt) {
  // A mapping of one page followed by one that is not: a tensor reaching past the first is a
  // reference to memory the sender does not have, wherever it starts.
  const long page = sysconf(_SC_PAGESIZE);
  void* mapped =
      mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  ASSERT_EQ(munmap(static_cast<char*>(mapped) + page, page), 0);
  for (const size_t floats : {size_t{16}, static_cast<size_t>(page) / sizeof(float) + 16}) {
    InProcessLink link;
    ASSERT_TRUE(link.client().link_traits().in_memory);
    const float* start = floats == 16 ? static_cast<const float*>(nullptr) + 1024  // unmapped
                                      : static_cast<const float*>(mapped);
    const std::span<const float> forged[] = {std::span(start, floats)};
    link.client().start_send(kFrameType, 0, {}, forged);  // never completes: nobody reads it
    while (!link.client().continue_send()) {
    }
    const std::string outcome = link.outcome();
    EXPECT_THAT(outcome, HasSubstr("bad frame from 127.0.0.1:"));
    EXPECT_THAT(outcome, HasSubstr("is not in its memory")) << floats << " floats";
  }
  munmap(mapped, page);
}

TEST(Link, AMailboxWhoseCountersMakeNoSenseIsAFrameErrorNamingThePeer) {
  InProcessLink link;
  ASSERT_TRUE(link.client().link_traits().in_memory);
  // The client created the one mailbox; every line but the first (the magic) becomes ones, as a
  // peer could write them in its own mapping.
  ASSERT_EQ(testing::scribble_over_mailboxes(), 1);
  EXPECT_THAT(link.outcome(), HasSubstr("worker1 corrupted the mailbox it shares with this task"));
}

// --transport shm against a peer started with tcp: each side refuses, naming both tasks, the flag
// and why; the client hears the server's refusal as the answer to its first frame.
TEST(Link, ShmAgainstTcpIsRefusedOnBothSidesSayingWhy) {
  for (const bool server_requires : {true, false}) {
    testing::LogCapture log;
    ServerOptions options = testing::loopback_options();
    options.connection.transport = server_requires ? Transport::kShm : Transport::kTcp;
    options.connection.identity = "ps 0";
    Server server(options, [](Connection& connection) { testing::echo(connection); });
    const Transport client = server_requires ? Transport::kTcp : Transport::kShm;
    const std::string tcp_side = server_requires ? "worker1" : "ps0";
    std::string error;
    try {
      const auto connection =
          connect("127.0.0.1", server.port(), kLoopbackSecret, client_options(client));
      testing::expect_echo_works(*connection);
    } catch (const LinkRefused& refused) {
      error = refused.what();
    }
    EXPECT_THAT(error, HasSubstr(fmt::format(
                           "--transport shm: {} cannot move payloads through "
                           "memory: {} was started with --transport tcp",
                           server_requires ? "ps0 and worker1" : "worker1 and ps0", tcp_side)));
    if (server_requires) {
      EXPECT_THAT(error, HasSubstr("ps0 refused worker1: --transport shm"));
    }
  }
}

}  // namespace
}  // namespace dtrain
