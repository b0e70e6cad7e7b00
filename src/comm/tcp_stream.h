// One connected TCP socket and the system-call loops over it, written once: partial reads and
// writes, EINTR, and deadlines turned into a TransportError that names the peer. Frames are
// comm/connection.h's business; this moves bytes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "comm/waitable.h"

namespace dtrain {

using SteadyClock = std::chrono::steady_clock;

// When a blocking call gives up: at `until`, or once no byte has moved for `stall_ms` (negative:
// never), whichever comes first. The stall bound suits bulk transfers of any size; `until` suits
// exchanges that must finish by a fixed time (a handshake).
struct IoDeadline {
  SteadyClock::time_point until = SteadyClock::time_point::max();
  int stall_ms = -1;
};

// Thread-safety: one thread may read while another writes; shutdown() may be called from any
// thread at any time. Everything else requires that no other thread is using the stream.
class TcpStream {
 public:
  // Takes ownership of `fd`, a connected TCP socket, whose remote end is `address`
  // ("10.0.0.7:2222"). Makes it non-blocking (the loops here wait in poll, with deadlines) and
  // turns Nagle off: a frame goes out as one write, so there is nothing to coalesce, and Nagle
  // would add delayed-ACK stalls. Buffer sizes are left to the kernel's autotuning.
  TcpStream(int fd, std::string address);
  ~TcpStream();  // closes the socket
  TcpStream(const TcpStream&) = delete;
  TcpStream& operator=(const TcpStream&) = delete;

  // One attempt to connect to host:port, giving up at `until`. A failed attempt is an expected
  // outcome of connect-with-retry, so it returns nullptr and sets `error` to the reason
  // ("Connection refused"). Name resolution is not bounded by `until` (the system resolver's own
  // timeouts apply). The socket runs `tcp_congestion` (comm/tcp_congestion.h) from its first
  // byte; a name the kernel refuses is a TransportError, since retrying cannot help.
  static std::unique_ptr<TcpStream> try_connect(const std::string& host, uint16_t port,
                                                SteadyClock::time_point until,
                                                std::string_view tcp_congestion,
                                                std::string& error);

  // The remote address, and the name errors use: the address, or "ps0 (10.0.0.7:2222)" once a
  // task name is set.
  const std::string& address() const { return address_; }
  const std::string& peer() const { return peer_; }
  void set_task_name(std::string_view task_name);

  // Declares the peer lost once timeout_ms (> 0) pass without its kernel acknowledging anything:
  // bytes we sent (TCP_USER_TIMEOUT) or, on a quiet connection, the keepalive probes the kernel
  // sends after a quarter of that in silence (SO_KEEPALIVE). A blocked read or write then fails
  // with a TransportError saying the peer stopped answering, even when no byte of ours is
  // outstanding. These are heartbeats the peer's kernel answers, so a peer that is alive but busy
  // (a ps waiting for a sync step) is never mistaken for a dead one; a dead host or a cut link is
  // found within seconds instead of the kernel's default of many minutes.
  void set_liveness_timeout(int timeout_ms);

  // Reads at least one byte and at most buf.size() (> 0); returns 0 if the peer closed the
  // connection. Throws TransportError on the deadline or a socket error.
  size_t read_some(std::span<std::byte> buf, const IoDeadline& deadline);
  // Fills buf. Throws TransportError on the deadline, a socket error, or the peer closing first.
  void read_exact(std::span<std::byte> buf, const IoDeadline& deadline);
  // Writes the pieces in order, gathered into few system calls (sendmsg). Throws TransportError.
  void write_all(std::span<const std::span<const std::byte>> pieces, const IoDeadline& deadline);

  // Non-blocking forms, for a thread that drives several streams at once: each makes one system
  // call and never waits.
  // Reads what has arrived, up to buf.size() (> 0); returns 0 if nothing has. Throws PeerClosed
  // if the peer has closed the connection, TransportError if the socket failed.
  size_t read_available(std::span<std::byte> buf);
  // Writes what the socket takes now of the pieces, starting `skip` bytes into the first; returns
  // the bytes written, 0 if the socket is full. Throws TransportError.
  size_t write_available(std::span<const std::span<const std::byte>> pieces, size_t skip);
  // The socket, for a poller of comm/'s own that also watches other descriptors (comm/server.h).
  int native_handle() const { return fd_; }
  // What a wait (comm/waitable.h) on this socket watches.
  Waitable waitable(bool read, bool write) const { return {fd_, read, write}; }

  // Shuts both directions down: blocked and later reads and writes return at once (end of stream
  // or an error). The descriptor stays open until the destructor, so a thread still inside a call
  // never sees it reused for another file.
  void shutdown();

 private:
  enum class Direction { kRead, kWrite };
  // Waits until the socket is ready in `direction` (or has an error to report); throws
  // TransportError once `until` or `stall_until` has passed.
  void wait_ready(Direction direction, SteadyClock::time_point stall_until,
                  const IoDeadline& deadline) const;
  [[noreturn]] void throw_errno(std::string_view call, int error) const;

  int fd_;
  std::string address_;
  std::string peer_;
  int liveness_timeout_ms_ = -1;  // set_liveness_timeout's, for the error that reports it
};

}  // namespace dtrain
