// StallWatch and its notice alone: what a stalled wait's lines say, when they come, and how the
// culprit's name merges in from a neighbour. Real stalled processes:
// tests/train/stall_report_test.cc.
#include "collective/ring_stall.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace dtrain {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;

std::string rank_name(int rank) { return fmt::format("worker{}", rank); }

struct Watched {
  std::vector<std::string> lines;
  StallWatch watch;
  explicit Watched(int rank, bool chief = false)
      : watch(rank, 3000, chief, rank_name,
              [this](const std::string& line) { lines.push_back(line); }) {}
};

TEST(StallNotice, ReadsWhatItWroteAndRefusesRanksOutsideTheRing) {
  const StallNotice notice{.op = 41, .culprit = 1, .silent_ms = 3100, .waiters = {0, 2}};
  MetaWriter meta;
  notice.write(meta);
  const std::optional<StallNotice> read = StallNotice::read(meta.bytes(), 3);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->op, 41u);
  EXPECT_EQ(read->culprit, 1);
  EXPECT_EQ(read->silent_ms, 3100u);
  EXPECT_EQ(read->waiters, (std::vector<int32_t>{0, 2}));
  EXPECT_FALSE(StallNotice::read(meta.bytes(), 2)) << "waiter 2 is not a rank of a ring of 2";
  EXPECT_FALSE(StallNotice::read(meta.bytes().first(meta.bytes().size() - 1), 3)) << "cut short";
  MetaWriter huge;
  huge.put(uint64_t{41}).put(int32_t{1}).put(uint32_t{0}).put(uint32_t{1u << 30});
  EXPECT_FALSE(StallNotice::read(huge.bytes(), 3)) << "a count beyond any ring";
}

TEST(StallWatch, ASilentNeighbourIsNamedAtTheWarningAndAgainAtDoublingIntervals) {
  Watched w(2);
  const auto t0 = SteadyClock::now();
  w.watch.begin(t0, 7, {.kind = "all-reduce", .bytes = 2048, .bucket = 3});
  EXPECT_EQ(w.watch.next_report(), t0 + milliseconds(3000));
  EXPECT_TRUE(w.watch.report(t0 + milliseconds(3000), 1, milliseconds(3000), "chunk 0"))
      << "the culprit is news for the neighbours";
  ASSERT_EQ(w.lines.size(), 1u);
  EXPECT_EQ(w.lines[0],
            "waiting 3.0 s for worker1, which has sent nothing for 3.0 s (all-reduce op 7 (bucket "
            "3, 2048 bytes): chunk 0)");
  EXPECT_EQ(w.watch.next_report(), t0 + milliseconds(6000));
  EXPECT_TRUE(w.watch.report(t0 + milliseconds(6000), 1, milliseconds(6000), "chunk 0"))
      << "said again: a neighbour may not have kept it";
  EXPECT_EQ(w.watch.next_report(), t0 + milliseconds(12000));
  w.watch.end(t0 + milliseconds(7500));
  EXPECT_EQ(
      w.lines.back(),
      "the wait for worker1 ended after 7.5 s; all-reduce op 7 (bucket 3, 2048 bytes) goes on");
  EXPECT_FALSE(w.watch.reported());
}

TEST(StallWatch, ANeighbourThatWaitsTooIsNotBlamedAndANoticeNamesTheCulpritAtOnce) {
  Watched w(0, /*chief=*/true);
  const auto t0 = SteadyClock::now();
  w.watch.begin(t0, 7, {.kind = "all-reduce", .bytes = 24, .bucket = -1});
  // worker2 sent keepalives a second ago: it waits too, and nobody is named yet.
  EXPECT_FALSE(w.watch.report(t0 + milliseconds(3000), 2, milliseconds(1000), "chunk 0"));
  EXPECT_EQ(w.lines.back(),
            "waiting 3.0 s for worker2, which waits too (all-reduce op 7 (24 "
            "bytes): chunk 0)");
  // Heard from a second ago: if it stays silent, it is looked at again once silent for 3 s.
  EXPECT_EQ(w.watch.next_report(), t0 + milliseconds(5000));
  EXPECT_FALSE(w.watch.take({.op = 5, .culprit = 1, .silent_ms = 3000, .waiters = {2}}))
      << "another collective's notice";
  EXPECT_FALSE(w.watch.take({.op = 8, .culprit = 1, .silent_ms = 3000, .waiters = {2}}))
      << "a later collective's notice";
  EXPECT_TRUE(w.watch.take({.op = 7, .culprit = 1, .silent_ms = 3000, .waiters = {2}}));
  EXPECT_EQ(w.watch.notice().culprit, 1);
  EXPECT_EQ(w.watch.notice().waiters, (std::vector<int32_t>{0, 2}));
  EXPECT_LE(w.watch.next_report(), SteadyClock::now()) << "said now, not at 6 s";
  w.watch.report(t0 + milliseconds(3100), 2, milliseconds(1100), "chunk 0");
  EXPECT_THAT(w.lines[w.lines.size() - 2], HasSubstr("worker1 holds the ring up"));
  EXPECT_THAT(w.lines.back(), HasSubstr("stalled ring: worker0, worker2 wait(s) on worker1"));
  EXPECT_FALSE(w.watch.take({.op = 7, .culprit = 1, .silent_ms = 3000, .waiters = {0, 2}}))
      << "nothing new: not passed on again";
}

// A rank that finished op 7 waits in op 8 on a neighbour still in op 7, held up by worker1: the
// neighbour's notice of op 7 names the culprit of op 8's wait too.
TEST(StallWatch, ANoticeOfTheCollectiveBeforeOursNamesTheCulprit) {
  Watched w(3);
  const auto t0 = SteadyClock::now();
  w.watch.begin(t0, 8, {.kind = "all-reduce", .bytes = 24, .bucket = -1});
  EXPECT_TRUE(w.watch.take({.op = 7, .culprit = 1, .silent_ms = 3000, .waiters = {0, 2}}));
  w.watch.report(t0 + milliseconds(3000), 2, milliseconds(500), "chunk 0");
  EXPECT_THAT(w.lines.back(), HasSubstr("worker1 holds the ring up"));
}

// The neighbours pass a notice on once. A rank that learnt the culprit while waiting for one
// chunk, and then for the next chunk of the same collective, still names it; in the next
// collective it starts afresh.
TEST(StallWatch, TheCulpritIsRememberedAcrossTheWaitsOfOneCollectiveOnly) {
  Watched w(3);
  const auto t0 = SteadyClock::now();
  const CollectiveNote note{.kind = "all-reduce", .bytes = 24, .bucket = -1};
  w.watch.begin(t0, 7, note);
  EXPECT_TRUE(w.watch.take({.op = 7, .culprit = 1, .silent_ms = 3000, .waiters = {0, 2}}));
  w.watch.end(t0 + milliseconds(100));  // chunk 2 came
  w.watch.begin(t0 + milliseconds(100), 7, note);
  EXPECT_TRUE(w.watch.knows_culprit());
  w.watch.report(t0 + milliseconds(3100), 2, milliseconds(500), "chunk 3");
  EXPECT_THAT(w.lines.back(), HasSubstr("worker1 holds the ring up"));
  EXPECT_EQ(w.watch.notice().waiters, (std::vector<int32_t>{0, 2, 3}));
  w.watch.begin(t0 + milliseconds(3200), 8, note);
  EXPECT_FALSE(w.watch.knows_culprit()) << "op 8 is another collective";
  EXPECT_TRUE(w.watch.notice().waiters.empty());
  w.watch.report(t0 + milliseconds(6200), 2, milliseconds(500), "chunk 0");
  EXPECT_THAT(w.lines.back(), Not(HasSubstr("holds the ring up")));
}

}  // namespace
}  // namespace dtrain
