// A process's place in a group of ranks that run collectives together (the process group of
// torch.distributed and MPI): it forms this rank's ring from its rank, the world size and some way
// for the ranks to learn each other's addresses, and owns the ring and the Communicator over it.
// How the addresses travel is the caller's: dtrain's rendezvous (cluster/rendezvous.h) for
// dtrain.distributed, a torch.distributed Store for the torch backend.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "collective/communicator.h"
#include "collective/ring_connector.h"
#include "collective/tcp_ring.h"
#include "comm/host_port.h"
#include "comm/tcp_congestion.h"
#include "comm/transport.h"

namespace dtrain {

struct RankGroupOptions {
  int rank = 0;
  int world_size = 1;
  std::string secret;  // the cluster secret, raw bytes; every rank's must be the same
  bool authenticate_frames = true;
  std::string tcp_congestion = kTcpCongestionAuto;  // ConnectionOptions::tcp_congestion
  Transport transport = Transport::kAuto;           // shared memory between ranks of one host
  // How long to wait for the ring to form, and for a stuck neighbour inside a collective.
  int timeout_ms = 60'000;
  std::string job = "rank";  // ranks are named "<job><rank>" in messages
  // The ranks that share this host's cores, which decides whether waiting ranks spin
  // (ring_spin_us); only a TCP ring on an oversubscribed host sleeps at once.
  int ranks_on_host = 1;
  CollectiveOptions collective;
};

// Given where this rank listens (host and the port it got), returns every rank's address, indexed
// by rank. It blocks until every rank has told its own; it throws whatever its medium throws.
using AddressExchange = std::function<std::vector<HostPort>(const HostPort& listening)>;

// Thread-safety: one thread at a time, as Communicator.
class RankGroup {
 public:
  // Listens at `listen_at` (port 0: a free one), learns every rank's address through `exchange`
  // and connects the ring to the right neighbour's. A group of one exchanges and connects
  // nothing. Throws TransportError if it cannot listen, CollectiveError if the ring does not form
  // within timeout_ms (naming the rank that did not come), AuthError for another secret, and
  // UsageError for a rank outside the world or an exchange that returns another world size.
  RankGroup(const RankGroupOptions& options, const HostPort& listen_at,
            const AddressExchange& exchange);
  ~RankGroup();
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  int rank() const { return communicator_->rank(); }
  int size() const { return communicator_->size(); }
  Communicator& communicator() { return *communicator_; }

  // "rank 0 of 2; to rank1 (left): shm (...); to rank1 (right): ..." for a start-up line.
  std::string describe() const;

  // Tells the other ranks why this one stops, so that they fail at once naming it rather than
  // after their timeout; every later collective here throws. Idempotent.
  void abort(std::string_view reason);

 private:
  std::unique_ptr<TcpRing> ring_;
  std::unique_ptr<Communicator> communicator_;
};

}  // namespace dtrain
