// StallWatch: when a wait is reported, what the lines say, and how notices merge.
#include "collective/ring_stall.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "base/error.h"
#include "base/machine_memory.h"

namespace dtrain {
namespace {

constexpr uint32_t kMaxRanks = 1u << 16;  // a notice longer than any ring is malformed

double seconds(std::chrono::nanoseconds span) {
  return std::chrono::duration<double>(span).count();
}

}  // namespace

void StallNotice::write(MetaWriter& meta) const {
  meta.put(op).put(culprit).put(silent_ms).put(static_cast<uint32_t>(waiters.size()));
  for (const int32_t waiter : waiters) meta.put(waiter);
}

std::optional<StallNotice> StallNotice::read(std::span<const std::byte> meta, int size) {
  try {
    MetaReader reader(meta);
    StallNotice notice;
    notice.op = reader.get<uint64_t>();
    notice.culprit = reader.get<int32_t>();
    notice.silent_ms = reader.get<uint32_t>();
    const auto count = reader.get<uint32_t>();
    if (count > kMaxRanks || notice.culprit < 0 || notice.culprit >= size) return std::nullopt;
    for (uint32_t i = 0; i < count; ++i) {
      const auto waiter = reader.get<int32_t>();
      if (waiter < 0 || waiter >= size) return std::nullopt;
      notice.waiters.push_back(waiter);
    }
    std::sort(notice.waiters.begin(), notice.waiters.end());
    notice.waiters.erase(std::unique(notice.waiters.begin(), notice.waiters.end()),
                         notice.waiters.end());
    return notice;
  } catch (const ShortMeta&) {
    return std::nullopt;
  }
}

StallWatch::StallWatch(int rank, int warning_ms, bool chief, std::function<std::string(int)> name,
                       std::function<void(const std::string&)> report)
    : rank_(rank),
      warning_(std::max(warning_ms, 0)),
      chief_(chief),
      name_(std::move(name)),
      report_(std::move(report)) {}

void StallWatch::begin(SteadyClock::time_point now, uint64_t op, CollectiveNote note) {
  began_ = now;
  next_report_ = enabled() ? now + warning_ : SteadyClock::time_point::max();
  reports_ = 0;
  waited_for_ = -1;
  note_ = note;
  // A collective waits chunk by chunk. What an earlier wait of the same one learnt still holds,
  // and must: the neighbours that told this rank once have nothing new to tell it again.
  if (op != notice_.op) {
    notice_ = StallNotice{};
    notice_.op = op;
  }
}

void StallWatch::end(SteadyClock::time_point now) {
  report_(fmt::format("the wait for {} ended after {:.1f} s; {} goes on", name_(waited_for_),
                      seconds(now - began_), describe_op()));
  reports_ = 0;
  next_report_ = SteadyClock::time_point::max();
}

std::string StallWatch::describe_op() const {
  const std::string size = format_bytes(note_.bytes);
  if (note_.bucket >= 0) {
    return fmt::format("{} op {} (bucket {}, {})", note_.kind, notice_.op, note_.bucket, size);
  }
  return fmt::format("{} op {} ({})", note_.kind, notice_.op, size);
}

bool StallWatch::add_waiter(int32_t rank) {
  auto at = std::lower_bound(notice_.waiters.begin(), notice_.waiters.end(), rank);
  if (at != notice_.waiters.end() && *at == rank) return false;
  notice_.waiters.insert(at, rank);
  return true;
}

bool StallWatch::report(SteadyClock::time_point now, int peer, std::chrono::milliseconds quiet,
                        const std::string& what) {
  const double waited = seconds(now - began_);
  add_waiter(rank_);
  if (quiet >= warning_ && notice_.culprit != peer) {
    // A waiting rank is never silent this long: the neighbour has stopped, or is busy elsewhere.
    notice_.culprit = peer;
    notice_.silent_ms = static_cast<uint32_t>(quiet.count());
    learnt_ = now;
  }
  // How long the culprit has been silent: as the rank beside it said, and since.
  const double silent = notice_.silent_ms / 1000.0 + seconds(now - learnt_);
  waited_for_ = peer;
  ++reports_;
  next_report_ =
      std::max(now + warning_ / 2, began_ + warning_ * (int64_t{1} << std::min(reports_, 20)));
  // A neighbour heard from during this wait (it was waiting too, then stopped) may yet go silent
  // for the warning's length: then it is the culprit, said then rather than at the next doubling.
  if (!knows_culprit() && quiet < warning_)
    next_report_ = std::min(next_report_, now + (warning_ - quiet));
  if (notice_.culprit == peer) {
    report_(fmt::format("waiting {:.1f} s for {}, which has sent nothing for {:.1f} s ({}: {})",
                        waited, name_(peer), quiet.count() / 1000.0, describe_op(), what));
  } else if (knows_culprit()) {
    report_(
        fmt::format("waiting {:.1f} s for {}, which waits too ({}: {}); {} holds the ring up: "
                    "it has sent nothing for {:.1f} s",
                    waited, name_(peer), describe_op(), what, name_(notice_.culprit), silent));
  } else {
    report_(fmt::format("waiting {:.1f} s for {}, which waits too ({}: {})", waited, name_(peer),
                        describe_op(), what));
  }
  if (chief_ && knows_culprit()) {
    std::string waiters;
    for (const int32_t waiter : notice_.waiters)
      waiters += fmt::format("{}{}", waiters.empty() ? "" : ", ", name_(waiter));
    report_(fmt::format("stalled ring: {} wait(s) on {}, silent for {:.1f} s", waiters,
                        name_(notice_.culprit), silent));
  }
  // Said again at every report, news or not: a neighbour that had moved on to the next
  // collective, or read a notice while it was between waits, has not kept it.
  return knows_culprit();
}

bool StallWatch::take(const StallNotice& notice) {
  // A notice of the collective before ours comes from a rank still in it, which holds ours up.
  const bool ours = notice.op == notice_.op || notice.op + 1 == notice_.op;
  if (!ours || notice.culprit == rank_) return false;
  bool news = false;
  if (!knows_culprit()) {
    notice_.culprit = notice.culprit;
    notice_.silent_ms = notice.silent_ms;
    learnt_ = SteadyClock::now();
    // A wait already reported without its culprit says who it is now, not a report later.
    if (reports_ > 0) next_report_ = SteadyClock::time_point::min();
    news = true;
  }
  for (const int32_t waiter : notice.waiters) news = add_waiter(waiter) || news;
  news = add_waiter(rank_) || news;
  return news;
}

}  // namespace dtrain
