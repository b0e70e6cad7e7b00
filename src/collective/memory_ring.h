// RingLinks in memory: n ranks in one process, each on a thread of its own, every message copied
// into the receiving neighbour's inbox for that side. The algorithms are tested, and counted, over
// it, and a strategy runs its ranks over it in one process (connector()).
//
// Failure is ring-wide, as TcpRing's propagation makes it: a rank that aborts, finds a message it
// did not expect, or waits longer than the timeout fails the whole ring, and every rank waiting or
// calling later throws that one message.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "collective/ring_connector.h"
#include "collective/ring_links.h"

namespace dtrain {

class MemoryRing {
 public:
  // timeout_ms: how long a recv waits for its message before it fails the ring (a connector's
  // RingOptions::timeout_ms replaces it for that rank).
  explicit MemoryRing(int n, int timeout_ms = 30'000);
  ~MemoryRing();
  MemoryRing(const MemoryRing&) = delete;
  MemoryRing& operator=(const MemoryRing&) = delete;

  int size() const;
  // Rank `rank`'s links, owned by the ring. REQUIRES: not handed out by connector(rank).
  RingLinks& links(int rank);
  // A connector that hands out rank `rank`'s links: listen() checks the options' size and rank
  // and takes their timeout, rank names and fingerprint; connect() waits for the left neighbour to
  // listen, fails the ring if its fingerprint differs (naming both ranks, as TCP ring formation
  // does) and returns the links (which may outlive the ring). REQUIRES: called once per rank.
  std::unique_ptr<RingConnector> connector(int rank);

  // How many ranks are blocked in recv right now.
  int waiting() const;
  // Messages sent so far, over all ranks.
  int messages() const;
  // Bytes sent so far over all ranks, in floats (4 bytes each).
  long floats_sent() const;

  // Runs body(rank) on one thread per rank; rethrows the first exception any of them threw.
  void run(const std::function<void(int rank)>& body);

  class Links;
  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;
  std::vector<std::unique_ptr<Links>> links_;
};

}  // namespace dtrain
