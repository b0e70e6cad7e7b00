// Forming a TCP ring (collective/tcp_ring.h): each rank listens for its left neighbour and connects
// to its right one. Both ends authenticate with the cluster secret and check that they agree on
// the ring's size, their ranks and a fingerprint of what they run; a neighbour that does not is
// refused, and told why, by name. Whether chunks then move by value or by reference
// (--transport) is each connection's own choice (comm/link_setup.h). What comes out is a connection
// per side, which the progress engine (TcpRing) drives.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "collective/ring_connector.h"
#include "collective/ring_links.h"
#include "comm/connection.h"
#include "comm/host_port.h"
#include "comm/server.h"

namespace dtrain {

// Thread-safety: one thread makes every call except port() and connection(); the server's thread
// runs the left neighbour's side of the handshake.
class RingFormation {
 public:
  // Listens for the left neighbour (size > 1). Throws TransportError if it cannot listen.
  explicit RingFormation(RingOptions options);
  ~RingFormation();
  RingFormation(const RingFormation&) = delete;
  RingFormation& operator=(const RingFormation&) = delete;

  uint16_t port() const;

  // Connects to the right neighbour and waits for the left one to connect to us. Throws
  // CollectiveError if either does not join within timeout_ms or refuses us, AuthError for a wrong
  // secret. REQUIRES: size > 1, not yet connected.
  void connect(const HostPort& right);

  // The connection to the neighbour on `side` as far as the ring has formed (null before): once
  // connect() has returned, the link the progress engine drives.
  Connection* connection(Side side);

  // Stops taking connections and closes both links. Idempotent; the destructor calls it.
  void close();

  std::string rank_name(int rank) const;  // "worker3"

 private:
  int size() const { return options_.size; }
  int rank() const { return options_.rank; }
  int left_rank() const { return (rank() + size() - 1) % size(); }
  int right_rank() const { return (rank() + 1) % size(); }

  // The server's handler for a connection: checks the hello, adopts the connection as the left
  // link (or refuses it), and holds it open until close().
  void serve_left(Connection& connection);
  std::string refusal_for(int size, int rank, uint64_t fingerprint, std::string_view peer) const;
  void wait_for_left(SteadyClock::time_point deadline);
  // Once the left neighbour refused for good has been told, this rank's own connect and wait end
  // with final_refusal_.
  void give_up_forming();
  // The refusal that ended forming the ring for good, if it has.
  std::string final_refusal();
  // Why the membership moved on past this ring's view (RingOptions::interrupt), or "".
  std::string interrupted() const;
  // " (this rank refused a peer: <why>)" when it has, for the errors of a ring that did not form:
  // the refused peer is usually the rank that never arrived.
  std::string refusal_note();
  // The options of both links' connections: limits, timeouts, identity and --transport.
  ConnectionOptions connection_options() const;

  const RingOptions options_;
  std::unique_ptr<Server> server_;     // accepts the left neighbour; null when size == 1
  std::unique_ptr<Connection> right_;  // we connected it

  std::mutex mutex_;  // left_, closing_, last_refusal_, left_failure_, final_refusal_
  std::condition_variable membership_;
  Connection* left_ = nullptr;  // it connected to us; owned by server_'s handler
  bool closing_ = false;
  std::string last_refusal_;
  std::string left_failure_;  // the left neighbour's link was refused under --transport shm: why
  // A left neighbour refused for good (another ring size, order or fingerprint): no ring can form,
  // so this rank's own connect and wait end with it once the neighbour has been told.
  std::string final_refusal_;
};

}  // namespace dtrain
