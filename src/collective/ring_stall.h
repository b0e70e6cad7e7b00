// A rank's account of a collective that has stopped moving (--stall_warning, issue 36): whom it
// waits for and what for, and which rank holds the ring up. A rank knows its own neighbours only:
// the one it waits on is either silent (no frame at all, not even the keepalives every waiting
// rank sends) and so the culprit, or waiting too. The culprit's name therefore travels: the rank
// beside it sends a kRingStall notice (collective/ring_protocol.h) naming it and the ranks known
// to wait, and every waiting rank that learns something new from one passes it on, so that every
// rank can name the rank that has not sent, and the chief can say who waits on whom.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "collective/ring_links.h"
#include "comm/meta_codec.h"
#include "comm/tcp_stream.h"

namespace dtrain {

// What a kRingStall notice says: in collective `op`, rank `culprit` has sent nothing to the ranks
// beside it for `silent_ms` (as the first to notice saw it), and these ranks wait on it.
struct StallNotice {
  uint64_t op = 0;
  int32_t culprit = -1;
  uint32_t silent_ms = 0;
  std::vector<int32_t> waiters;  // ascending, no repeats

  void write(MetaWriter& meta) const;
  // nullopt for a notice whose ranks are not ranks of a ring of `size`, or that is cut short.
  static std::optional<StallNotice> read(std::span<const std::byte> meta, int size);
};

// One rank's watch over its waits. Thread-safety: the ring's one thread.
class StallWatch {
 public:
  // warning_ms <= 0: never warns. `name` names a rank ("worker3"); `report` takes each line, which
  // leaves out this rank's own name. The chief's reports add the summary.
  StallWatch(int rank, int warning_ms, bool chief, std::function<std::string(int)> name,
             std::function<void(const std::string&)> report);

  bool enabled() const { return warning_.count() > 0; }
  // The longest a waiting rank may stay silent to its neighbours: they take a longer silence for
  // a stall. Keepalives go at least this often.
  std::chrono::milliseconds keepalive_every() const { return warning_ / 2; }

  // A wait for collective `op` begins (a chunk, or the neighbours taking ours). The culprit and
  // waiters known from the same op's earlier waits are kept; another op starts afresh.
  void begin(SteadyClock::time_point now, uint64_t op, CollectiveNote note);
  // The wait is over: "the wait for worker1 ended after 7.4 s" if it was reported.
  void end(SteadyClock::time_point now);
  bool reported() const { return reports_ > 0; }
  // When the next report of this wait is due (warning, then at doubling intervals).
  SteadyClock::time_point next_report() const { return next_report_; }

  // The wait has lasted past next_report(): reports one line (the chief a second, the summary) on
  // waiting for `peer` about `what` ("chunk op 3 step 1 chunk 0" or "worker1 to take our chunks"),
  // given that `peer` has sent nothing for `quiet`. Returns whether a notice should go out: at
  // every report once the culprit is known.
  bool report(SteadyClock::time_point now, int peer, std::chrono::milliseconds quiet,
              const std::string& what);
  // A neighbour's notice (of this collective, or of the one before, from a rank still in it),
  // during a wait: whether this rank should pass the merged notice on.
  bool take(const StallNotice& notice);

  // The notice this rank passes on, and the culprit's side to leave out.
  const StallNotice& notice() const { return notice_; }
  bool knows_culprit() const { return notice_.culprit >= 0; }

 private:
  bool add_waiter(int32_t rank);
  std::string describe_op() const;

  const int rank_;
  const std::chrono::milliseconds warning_;
  const bool chief_;
  const std::function<std::string(int)> name_;
  const std::function<void(const std::string&)> report_;

  SteadyClock::time_point began_;
  SteadyClock::time_point next_report_ = SteadyClock::time_point::max();
  int reports_ = 0;
  int waited_for_ = -1;  // the neighbour the last report named
  CollectiveNote note_;
  StallNotice notice_;
  SteadyClock::time_point learnt_;  // when this rank learnt the culprit
};

}  // namespace dtrain
