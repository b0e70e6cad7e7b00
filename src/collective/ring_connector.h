// How a rank joins its ring without naming the transport (DESIGN.md §2a): a RingConnector takes
// the ring's options, starts listening for the left neighbour, and later connects to the right one
// and hands back the formed ring as RingLinks. A strategy is given one; tcp_ring_connector() forms
// the ring over comm/ (collective/tcp_ring.h), MemoryRing::connector() in one process
// (collective/memory_ring.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/stop_request.h"
#include "collective/ring_interrupt.h"
#include "collective/ring_links.h"
#include "comm/host_port.h"
#include "comm/tcp_congestion.h"
#include "comm/transport.h"

namespace dtrain {

struct RingOptions {
  int size = 1;
  int rank = 0;
  // Where to listen for the left neighbour; port 0 lets the system pick (TcpRing::port()).
  std::string bind_host = "0.0.0.0";
  uint16_t port = 0;
  // Where the right neighbour listens (connect_ring and the connectors; TcpRing::connect takes it
  // as its argument).
  HostPort right;
  std::string secret;                               // the cluster secret, raw bytes
  bool authenticate_frames = true;                  // ConnectionOptions::authenticate_frames
  std::string tcp_congestion = kTcpCongestionAuto;  // ConnectionOptions::tcp_congestion
  // Ranks whose fingerprint differs (another model, another layout) are refused by name.
  uint64_t fingerprint = 0;
  // How long to wait for the ring to form, and how long a neighbour may move no byte inside a
  // collective before it is declared lost (--collective_timeout).
  int timeout_ms = 60'000;
  // Before sleeping in poll(), a waiting rank retries for this long: a sleep and its wake-up cost
  // more than a chunk's transfer on loopback. 0: sleep at once. See ring_spin_us().
  int spin_us = 50;
  std::string job = "worker";  // ranks are named "<job><rank>" in messages
  // How chunks reach a neighbour on this host (comm/transport.h). Under kShm a neighbour whose
  // memory cannot be read, or that was started with --transport tcp, keeps the ring from forming.
  Transport transport = Transport::kAuto;
  // While connecting to the right neighbour: a stop request ends the wait (StopRequested), and
  // wait_report, if set, is told every wait_report_interval_ms that it goes on (connection.h).
  const StopRequest* stop = nullptr;
  std::function<void(const std::string&)> wait_report;
  int wait_report_interval_ms = 10'000;
  // A wait inside a collective longer than this is reported, naming the rank that holds the ring
  // up, again at doubling intervals until it ends (collective/ring_stall.h; --stall_warning).
  // 0: never. The chief's reports add who waits on whom. The lines go to wait_report where it is
  // set, else to the log.
  int stall_warning_ms = 3000;
  bool chief = false;
  // An elastic job's ring (collective/ring_interrupt.h): formed for membership view `view`, it
  // stops waiting once `interrupt` has been raised for a later view. Null: never interrupted.
  RingInterrupt* interrupt = nullptr;
  uint64_t view = 0;
  // The ranks' names in messages, by rank, when they are not "<job><rank>" (an elastic job's ranks
  // follow its membership, while each worker keeps its task's name).
  std::vector<std::string> names;
};

// The spin that suits `ranks_here` ranks sharing this machine's cores. Retrying pays while every
// rank has a core of its own. Once they outnumber the cores, it steals more than it saves over TCP,
// whose every chunk is kernel work for the core; chunks that move through memory need only a short
// announcement, and there a sleep's wake-up costs more than the copy (4 ranks on 2 cores, 1 MiB:
// 0.55 ms spinning against 0.75 ms sleeping at once). Under Transport::kAuto the ring spins, even
// on the rare link that falls back to TCP.
int ring_spin_us(int ranks_here, Transport transport);

// Forms one rank's ring in two steps, so that a rank can be reachable (listening) before it is
// ready to wait for its neighbours. Thread-safety: one thread.
class RingConnector {
 public:
  virtual ~RingConnector() = default;

  // Starts taking the left neighbour's connection. Throws TransportError if it cannot listen.
  // REQUIRES: called once, before connect().
  virtual void listen(const RingOptions& options) = 0;

  // Connects to the right neighbour and waits for the left one; returns this rank's ring. Throws
  // CollectiveError if a neighbour does not join within timeout_ms or refuses this rank (naming
  // it), AuthError for a wrong secret. REQUIRES: after listen(), once.
  virtual std::unique_ptr<RingLinks> connect() = 0;

  // After a connect() that threw: tells the neighbours already reached why this rank stops, so
  // that they do not wait for their timeout or blame a closed connection. Idempotent.
  virtual void abort(std::string_view reason) = 0;

  // Whether listen() takes the neighbours' connections at RingOptions::bind_host and port; false
  // where the ranks share one process and that address means nothing.
  virtual bool has_address() const { return true; }
};

// A connector that forms the ring over comm/ (TCP, chunks through memory between ranks of one
// host as RingOptions::transport allows).
std::unique_ptr<RingConnector> tcp_ring_connector();

// listen() and connect() of tcp_ring_connector() in one call.
std::unique_ptr<RingLinks> connect_ring(const RingOptions& options);

}  // namespace dtrain
