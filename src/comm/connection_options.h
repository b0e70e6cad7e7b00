// How a Connection behaves: its limits, timeouts, who it says it is, and how it waits for a peer
// (comm/connection.h); and a server's say over who may connect (comm/server.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/stop_request.h"
#include "comm/auth.h"
#include "comm/tcp_congestion.h"
#include "comm/transport.h"

namespace dtrain {

struct ConnectionOptions {
  // Names the peer in errors and logs, e.g. "ps0"; the address is always shown too.
  std::string task_name;
  // A frame announcing a longer payload is refused before anything is allocated for it, and so is
  // a meta block over max_meta_bytes (meta is buffered; tensors are not).
  uint64_t max_payload_bytes = uint64_t{1} << 30;
  uint64_t max_meta_bytes = uint64_t{16} << 20;
  // A send, or a frame once its first byte has arrived, fails with TransportError when no byte
  // moves for this long: a dead or partitioned peer. Negative: never.
  int io_timeout_ms = 30'000;
  // How long receive() waits for the next frame to begin. Negative: forever (a quiet peer may just
  // be idle).
  int idle_timeout_ms = -1;
  // A peer whose kernel acknowledges nothing for this long, not even the keepalive probes of a
  // quiet connection, is lost: its host died or the network is cut (TcpStream::
  // set_liveness_timeout). connect() also gives up one attempt after this long and tries again,
  // so that a link that comes back is used at once. Negative: the kernel's defaults (minutes).
  int liveness_timeout_ms = 10'000;
  // connect(): total time for connect-with-retry before giving up.
  int connect_timeout_ms = 30'000;
  // connect(): while it retries, a "still waiting for <task> at <address> (<last error>); N s
  // left" line to wait_report every wait_report_interval_ms (none if empty); a stop request ends
  // the wait with StopRequested (none if null).
  std::function<void(const std::string&)> wait_report;
  int wait_report_interval_ms = 10'000;
  const StopRequest* stop = nullptr;
  // connect(): a reason to stop retrying at once, as PeerWaitOptions::abandon (none if empty).
  std::function<std::string()> abandon_wait;
  // The whole handshake, either side, must finish within this.
  int handshake_timeout_ms = 10'000;
  // Who this end is, said in the handshake and bound to the connection ("worker 1", "ps 0"; empty
  // for a tool): the other side reads it as peer_identity(). At most kMaxIdentityBytes of
  // printable ASCII.
  std::string identity;
  // Every frame after the handshake carries a GMAC tag (comm/frame_mac.h) in place of the CRC.
  // Both ends must agree, or the handshake fails saying so; off only by an explicit flag.
  bool authenticate_frames = true;
  // The TCP congestion control of the socket, set before it connects (comm/tcp_congestion.h: auto,
  // host or a name). For a server, its listening socket's, which every accepted one inherits.
  std::string tcp_congestion = kTcpCongestionAuto;
  // Which process this end is, said in the handshake beside the identity and, by a client, proved
  // (comm/process_key.h). 0: this process's own key; tests that play several processes in one
  // set their own number, from which a key is derived.
  uint64_t incarnation = 0;
  // The protocol's rule of which frame types may carry tensors: a frame of another type that
  // declares tensor bytes is a FrameError, raised once its opening is authenticated and before it
  // is returned. Null: any type may.
  bool (*type_carries_tensors)(uint16_t type) = nullptr;
  // How payloads travel (comm/transport.h), agreed with the peer in the link step right after the
  // handshake (comm/link_setup.h). Both ends say what they want; a client says it in
  // handshake_as_client, a server answers in its first receive().
  Transport transport = Transport::kTcp;
};

// A server's say, during the handshake, over a client that has proved the secret: "" admits it,
// anything else is the reason it is refused (sent to it in a REFUSED frame, and thrown).
using Admission = std::function<std::string(const HandshakeParams& client)>;

}  // namespace dtrain
