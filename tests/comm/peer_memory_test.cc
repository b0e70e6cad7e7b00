// Reading and writing another process's memory (comm/peer_memory.h) with real processes: a forked
// child's bytes are read and written, a forged or foreign offer is told apart, a process of
// another user is refused, and a process that has gone is an error that names the peer.
#include "comm/peer_memory.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;

// A child process that fills `bytes` with its own pattern, says so through a pipe, and waits
// until it is killed. The parent's copy of `bytes` keeps the parent's values (copy-on-write).
class PatternChild {
 public:
  // become_uid >= 0: the child first switches to that user (REQUIRES: run as root).
  explicit PatternChild(std::vector<std::byte>& bytes, int become_uid = -1) {
    int ready[2];
    if (pipe(ready) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      if (become_uid >= 0 && setuid(static_cast<uid_t>(become_uid)) != 0) _exit(1);
      for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 7 + 3);
      const char one = 1;
      (void)!write(ready[1], &one, 1);
      for (;;) pause();
    }
    close(ready[1]);
    char got = 0;
    (void)!read(ready[0], &got, 1);
    close(ready[0]);
  }
  ~PatternChild() { stop(); }
  int32_t pid() const { return pid_; }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

TEST(PeerMemory, ReadsAnotherProcesssBytesAndNamesTheOneThatHasGone) {
  std::vector<std::byte> bytes(3 << 20, std::byte{0});  // spans many pages
  PatternChild child(bytes);
  const auto address = reinterpret_cast<uint64_t>(bytes.data());
  std::vector<std::byte> seen(bytes.size());
  read_peer_memory(child.pid(), address, seen, "worker1");
  for (size_t i = 0; i < seen.size(); ++i) {
    ASSERT_EQ(seen[i], static_cast<std::byte>(i * 7 + 3)) << "byte " << i;
  }
  EXPECT_EQ(bytes[1], std::byte{0});  // what was read is the child's, not ours

  const int32_t gone = child.pid();
  child.stop();
  try {
    read_peer_memory(gone, address, seen, "worker1");
    FAIL() << "read the memory of a process that has exited";
  } catch (const TransportError& error) {
    EXPECT_THAT(error.what(), HasSubstr("worker1"));
    EXPECT_THAT(error.what(), HasSubstr("No such process"));
  }
}

TEST(PeerMemory, WritesAnotherProcesssBytesAndNamesTheOneThatHasGone) {
  std::vector<std::byte> bytes(3 << 20, std::byte{0});
  PatternChild child(bytes);
  const auto address = reinterpret_cast<uint64_t>(bytes.data());
  std::vector<std::byte> written(bytes.size());
  for (size_t i = 0; i < written.size(); ++i) written[i] = static_cast<std::byte>(i * 13 + 1);
  write_peer_memory(child.pid(), address, written, "worker1");
  std::vector<std::byte> seen(bytes.size());
  read_peer_memory(child.pid(), address, seen, "worker1");
  EXPECT_EQ(seen, written);
  EXPECT_EQ(bytes[1], std::byte{0});  // what was written is the child's, not ours

  const int32_t gone = child.pid();
  child.stop();
  try {
    write_peer_memory(gone, address, written, "worker1");
    FAIL() << "wrote into the memory of a process that has exited";
  } catch (const PeerProcessGone& error) {
    EXPECT_THAT(error.what(),
                HasSubstr("could not write 3145728 bytes into the memory of worker1"));
    EXPECT_THAT(error.what(), HasSubstr("No such process"));
  }
}

// A verifier running as root may read any process; it takes only its own user's.
TEST(PeerMemory, AnOfferFromAProcessOfAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to start a process of another user";
  std::vector<std::byte> bytes(kChallengeBytes);
  PatternChild child(bytes, /*become_uid=*/65534);
  Challenge challenge;
  for (size_t i = 0; i < challenge.size(); ++i) challenge[i] = static_cast<std::byte>(i * 7 + 3);
  const MemoryOffer offer{.pid = child.pid(), .address = reinterpret_cast<uint64_t>(bytes.data())};
  EXPECT_THAT(check_memory_offer(offer, challenge),
              HasSubstr(fmt::format("process {} runs as another user (uid 65534, this task as "
                                    "uid 0)",
                                    child.pid())));
}

// The verifier draws the challenge, so only a process that was sent it can show it.
TEST(PeerMemory, AnOfferIsProvedByTheVerifiersChallengeOnly) {
  const Challenge challenge = new_challenge();
  EXPECT_NE(challenge, new_challenge());
  const MemoryProof proof(challenge, /*verifier_shares_host=*/false);
  const MemoryOffer offer = proof.offer();
  EXPECT_EQ(offer.pid, getpid());
  EXPECT_EQ(check_memory_offer(offer, challenge), "");

  // Other bytes at that address (another process at that pid, on another host or in another pid
  // namespace, or a peer pointing at bytes it did not receive from us).
  EXPECT_THAT(check_memory_offer(offer, new_challenge()), HasSubstr("another process"));

  // A pid that is no process at all.
  std::vector<std::byte> unused(1);
  PatternChild child(unused);
  MemoryOffer gone = offer;
  gone.pid = child.pid();
  child.stop();
  EXPECT_THAT(check_memory_offer(gone, challenge), HasSubstr("cannot be read from here"));
}

// Only a verifier that connects from an address of this host can read our memory, so only for one
// is Yama's restriction lifted.
TEST(PeerMemory, AddressesOfThisHostAreToldFromOthers) {
  auto v4 = [](const char* text) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(2222);
    EXPECT_EQ(inet_pton(AF_INET, text, &address.sin_addr), 1) << text;
    return is_address_of_this_host(reinterpret_cast<const sockaddr*>(&address), sizeof address);
  };
  EXPECT_TRUE(v4("127.0.0.1"));
  EXPECT_TRUE(v4("127.0.0.53"));  // all of 127/8 is this host's
  EXPECT_FALSE(v4("192.0.2.1"));  // TEST-NET-1 (RFC 5737), never a host's own
  sockaddr_un unix_address{};
  unix_address.sun_family = AF_UNIX;
  EXPECT_FALSE(is_address_of_this_host(reinterpret_cast<const sockaddr*>(&unix_address),
                                       sizeof unix_address));
}

TEST(PeerMemory, TransportNamesRoundTripAndABadOneIsNamed) {
  for (const Transport t : {Transport::kAuto, Transport::kTcp, Transport::kShm}) {
    EXPECT_EQ(parse_transport(transport_name(t)), t);
  }
  try {
    parse_transport("rdma");
    FAIL() << "accepted --transport rdma";
  } catch (const std::invalid_argument& error) {
    EXPECT_THAT(error.what(), HasSubstr("--transport rdma: choose one of auto, tcp, shm"));
  }
  // What --transport accepts (plan/flags.cc takes its choices from here).
  EXPECT_EQ(transport_names(), (std::vector<std::string_view>{"auto", "tcp", "shm"}));
}

}  // namespace
}  // namespace dtrain
