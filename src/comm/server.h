// Accepts connections, authenticates each one, and runs a handler on a thread per authenticated
// connection; the handshakes themselves all run on one thread, without blocking, so that a peer
// without the secret costs a descriptor and never a thread. A task's identity (comm/auth.h) is held
// by one live connection at a time: another process claiming it is refused, naming where the first
// is connected from. One peer's failure (bad secret, garbage, a bad frame, a dead socket) closes
// that peer's connection with a logged reason; the server keeps serving everyone else.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/rate_limited_warning.h"
#include "comm/connection.h"

namespace dtrain {

struct ServerOptions {
  std::string bind_host = "0.0.0.0";
  uint16_t port = 0;   // 0: the system picks a free port; Server::port() tells which
  std::string secret;  // the cluster secret, raw bytes; must not be empty
  // Limits and timeouts of every accepted connection (its task_name and connect_timeout_ms are
  // unused). handshake_timeout_ms bounds how long a peer that has not authenticated is kept.
  ConnectionOptions connection;
  // Connections still in their handshake, beyond which the oldest is dropped: what peers without
  // the secret can cost the server in descriptors.
  int max_unauthenticated = 32;
};

// What happened to the connections so far; every accepted connection ends up counted in exactly
// one of rejected, failed or finished (after it ends), and also in authenticated if it got there.
struct ServerStats {
  uint64_t accepted = 0;       // TCP connections accepted
  uint64_t authenticated = 0;  // passed the handshake; the handler ran
  uint64_t rejected = 0;       // failed or abandoned the handshake
  uint64_t failed = 0;         // closed for an error after authenticating (bad frame, dead peer)
  uint64_t finished = 0;       // the handler returned, or the peer hung up between frames
  // Of the rejected, why: dropped while authenticating, to make room for others; failed the
  // handshake's proof (another cluster secret) or refused its identity; sent what is not a
  // handshake. The rest hung up or timed out.
  uint64_t shed = 0;
  uint64_t failed_authentication = 0;
  uint64_t malformed = 0;
};

// "3 connection(s) rejected (2 dropped while authenticating under load, 1 failed
// authentication)": the
// rejections in `stats`, by kind, for a summary line; empty when there were none.
std::string describe_rejections(const ServerStats& stats);

// Thread-safety: port(), stats() and wait_for() from any thread; stop() and the destructor from
// any thread except a handler's own.
class Server {
 public:
  // Runs on the connection's own thread after the handshake, typically looping on
  // connection.receive() until the peer hangs up. The connection is closed when it returns. A
  // TransportError escaping it (FrameError for a frame it cannot accept, e.g. an unknown type)
  // closes that connection with a warning; any other exception closes it with an error log.
  using Handler = std::function<void(Connection&)>;

  // Binds and listens before returning, so port() is valid and clients may connect at once.
  // Throws UsageError for an empty secret, TransportError if it cannot listen.
  Server(ServerOptions options, Handler handler);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  uint16_t port() const { return port_; }

  // Closes the listening socket and every connection (waking their handlers), and joins every
  // thread. Idempotent.
  void stop();

  ServerStats stats() const;
  // Waits until `done(stats())` holds or `timeout` passes; returns whether it held.
  bool wait_for(const std::function<bool(const ServerStats&)>& done,
                std::chrono::milliseconds timeout) const;

 private:
  // How long accepting pauses after the descriptors ran out (EMFILE lasts a while): no spinning.
  static constexpr std::chrono::milliseconds kAcceptRetry{100};
  struct Peer {
    // Destroyed, and its socket closed, the moment the peer is done: descriptors must not wait
    // for the next accept, which is what fails once they run out.
    std::unique_ptr<Connection> connection;
    std::jthread thread;  // the handler's, once authenticated
    SteadyClock::time_point handshake_until;
    bool done = false;           // guarded by mutex_
    bool authenticated = false;  // guarded by mutex_
    // What the client said of itself, once admitted (guarded by mutex_): one live connection per
    // identity, save reconnections of the same process.
    std::string identity;
    uint64_t incarnation = 0;
  };

  // Handshake thread: waits on the listener, on every connection still authenticating, and on
  // wake_ (for stop()); accepts what is pending and moves each handshake on as far as its socket
  // allows.
  void handshake_loop(std::stop_token stop);
  // Accepts until none is pending; after running out of descriptors, sheds and pauses accepting.
  void accept_pending();
  void adopt(int fd, const sockaddr_storage& address, socklen_t length);
  // Two descriptors held back for the moment the others run out: closed first thing then, so that
  // shedding, logging (and a sanitizer's checks) have descriptors to work with; held again when
  // accepting resumes.
  void hold_reserve();
  void release_reserve();
  // One step of a peer's handshake; once it is through, the handler's thread.
  void advance_handshake(Peer& peer);
  void wake_handshakes();
  void reap_finished_peers();
  // Closes the oldest connections still authenticating until at most `keep` are left, saying why,
  // and counts them shed and rejected. Handshake thread only.
  // (Warnings about rejected connections go through rejection_warnings_: a flood must not flood
  // the log.)
  void shed_unauthenticated(size_t keep, const char* why);
  size_t unauthenticated() const;  // stable on the handshake thread, the only one to change it
  // An authenticated connection's thread: the handler.
  void serve(Peer& peer);
  // The handshake's admission of `peer`'s client: refused while another process holds a live
  // connection under the same identity. Takes mutex_.
  std::string admit(Peer& peer, const HandshakeParams& client);
  // Counts the peer under `counter` (and `why`, if any, in the same step) and marks it done.
  void finish(Peer& peer, uint64_t ServerStats::*counter, uint64_t ServerStats::*why = nullptr);

  // Counts a connection that failed its handshake with `error`, and says so (rate-limited).
  void reject(Peer* peer, const std::exception& error);

  const ServerOptions options_;
  const Handler handler_;
  std::unique_ptr<RateLimitedWarning> rejection_warnings_;
  int listen_fd_ = -1;  // the handshake thread's while it runs
  uint16_t port_ = 0;
  std::atomic<bool> stopping_ = false;

  mutable std::mutex mutex_;
  mutable std::condition_variable stats_changed_;
  ServerStats stats_;       // guarded by mutex_
  std::list<Peer> peers_;   // guarded by mutex_; a list, so that a Peer never moves
  std::mutex stop_mutex_;   // serialises stop()
  int wake_[2] = {-1, -1};  // a pipe: stop() wakes the handshake thread
  // Handshake thread only: when accepting resumes after the descriptors ran out.
  SteadyClock::time_point accept_again_at_{};
  int reserve_[2] = {-1, -1};  // handshake thread only, once it runs
  std::jthread handshaker_;    // last: started once everything above exists
};

}  // namespace dtrain
