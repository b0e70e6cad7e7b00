// The mailbox two processes of one host share (comm/shared_mailbox.h): records cross between real
// processes in order, past the ring's wrap-around; a full mailbox refuses a post until the peer
// takes; the sleeping flag and the news it guards are seen by the other side; a peer that
// scribbles over the counters is a FrameError naming it; and only a sealed mailbox is attached.
#include "comm/shared_mailbox.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

SharedMailbox::Record record_for(uint64_t i) { return {{i, i * 3, ~i, 42}}; }

// Polls `ready` until it holds or 30 s pass (a deadline against a hung peer, not a delay).
template <typename Ready>
bool poll_until(Ready&& ready) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!ready()) {
    if (Clock::now() > deadline) return false;
  }
  return true;
}

TEST(SharedMailbox, CarriesRecordsBothWaysBetweenTwoProcessesInOrder) {
  constexpr uint64_t kCount = 3 * SharedMailbox::kSlots + 7;  // wraps around the slots
  auto mine = SharedMailbox::create("the child");
  const pid_t parent = getpid();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Echoes each record back with its first word incremented, and acknowledges it.
    try {
      auto theirs = SharedMailbox::attach(parent, mine->fd(), "the parent");
      for (uint64_t echoed = 0; echoed < kCount;) {
        SharedMailbox::Record record;
        if (!theirs->try_take(record)) continue;
        if (record.words[1] != record.words[0] * 3 || record.words[2] != ~record.words[0]) _exit(2);
        ++record.words[0];
        while (!theirs->try_post(record)) {
        }
        theirs->acknowledge();
        ++echoed;
      }
      _exit(0);
    } catch (...) {
      _exit(1);
    }
  }
  std::vector<uint64_t> echoes;
  uint64_t posted = 0;
  const bool finished = poll_until([&] {
    if (posted < kCount && mine->try_post(record_for(posted))) ++posted;
    SharedMailbox::Record record;
    while (mine->try_take(record)) echoes.push_back(record.words[0]);
    return echoes.size() == kCount && mine->acknowledged() == kCount;
  });
  int status = 0;
  if (!finished) kill(child, SIGKILL);
  waitpid(child, &status, 0);
  ASSERT_TRUE(finished) << echoes.size() << " echoes, " << mine->acknowledged() << " acknowledged";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  for (uint64_t i = 0; i < kCount; ++i) ASSERT_EQ(echoes[i], i + 1) << i;
  EXPECT_FALSE(mine->has_news());
}

TEST(SharedMailbox, AFullMailboxRefusesAPostUntilThePeerTakesOne) {
  auto creator = SharedMailbox::create("the attaching side");
  auto attached = SharedMailbox::attach(getpid(), creator->fd(), "the creating side");
  for (uint64_t i = 0; i < SharedMailbox::kSlots; ++i)
    ASSERT_TRUE(creator->try_post(record_for(i)));
  EXPECT_FALSE(creator->try_post(record_for(SharedMailbox::kSlots)));
  SharedMailbox::Record record;
  ASSERT_TRUE(attached->try_take(record));
  EXPECT_EQ(record.words[0], 0u);
  EXPECT_TRUE(creator->try_post(record_for(SharedMailbox::kSlots)));
  EXPECT_FALSE(creator->try_post(record_for(SharedMailbox::kSlots + 1)));
}

TEST(SharedMailbox, ASleepingSideIsSeenAndFindsThePeersPostsAndAcknowledgementsAsNews) {
  auto a = SharedMailbox::create("b");
  auto b = SharedMailbox::attach(getpid(), a->fd(), "a");
  EXPECT_FALSE(b->peer_sleeping(SharedMailbox::kForRecords | SharedMailbox::kForAcks));
  a->set_sleeping(SharedMailbox::kForRecords);
  EXPECT_TRUE(b->peer_sleeping(SharedMailbox::kForRecords));
  EXPECT_FALSE(b->peer_sleeping(SharedMailbox::kForAcks));
  EXPECT_FALSE(a->has_news());
  ASSERT_TRUE(b->try_post(record_for(1)));
  EXPECT_TRUE(a->has_news());
  SharedMailbox::Record record;
  ASSERT_TRUE(a->try_take(record));
  EXPECT_FALSE(a->has_news());
  EXPECT_FALSE(b->has_news());
  a->acknowledge();
  EXPECT_TRUE(b->has_news());
  EXPECT_EQ(b->acknowledged(), 1u);
  EXPECT_FALSE(b->has_news());
  a->set_sleeping(SharedMailbox::kForAcks);
  EXPECT_TRUE(b->peer_sleeping(SharedMailbox::kForAcks));
  EXPECT_FALSE(b->peer_sleeping(SharedMailbox::kForRecords));
  a->set_sleeping(0);
  EXPECT_FALSE(b->peer_sleeping(SharedMailbox::kForRecords | SharedMailbox::kForAcks));
}

TEST(SharedMailbox, CountersAPeerScribbledOverAreAFrameErrorNamingIt) {
  auto creator = SharedMailbox::create("worker1");
  auto attached = SharedMailbox::attach(getpid(), creator->fd(), "worker0");
  // What a peer could do to its own mapping: everything after the magic number set to ones.
  const size_t bytes = static_cast<size_t>(lseek(creator->fd(), 0, SEEK_END));
  void* page = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, creator->fd(), 0);
  ASSERT_NE(page, MAP_FAILED);
  std::memset(static_cast<char*>(page) + 64, 0xff, bytes - 64);
  munmap(page, bytes);
  SharedMailbox::Record record;
  const auto corrupted_by = [](const char* peer) {
    return ::testing::ThrowsMessage<FrameError>(
        HasSubstr(std::string(peer) + " corrupted the mailbox it shares with this task"));
  };
  EXPECT_THAT([&] { creator->try_take(record); }, corrupted_by("worker1"));
  EXPECT_THAT([&] { attached->acknowledged(); }, corrupted_by("worker0"));
}

TEST(SharedMailbox, OnlyASealedMailboxIsAttachedAndAMissingDescriptorIsNamed) {
  const int unsealed = static_cast<int>(memfd_create("not-a-mailbox", MFD_CLOEXEC));
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(ftruncate(unsealed, 1 << 20), 0);
  EXPECT_THAT([&] { SharedMailbox::attach(getpid(), unsealed, "worker3"); },
              ::testing::ThrowsMessage<TransportError>(
                  HasSubstr("could not share a mailbox with worker3 (process")));
  EXPECT_THAT([&] { SharedMailbox::attach(getpid(), unsealed, "worker3"); },
              ::testing::ThrowsMessage<TransportError>(HasSubstr("is not a sealed mailbox")));
  close(unsealed);
  EXPECT_THAT([&] { SharedMailbox::attach(getpid(), 1 << 20, "worker3"); },
              ::testing::ThrowsMessage<TransportError>(HasSubstr("pidfd_getfd failed")));
}

}  // namespace
}  // namespace dtrain
