// Accepts connections, authenticates each one, and runs a handler on a thread per authenticated
// connection; the handshakes themselves all run on one thread, without blocking, so that a peer
// without the secret costs a descriptor and never a thread. A task's identity (comm/auth.h) is held
// by one live connection at a time: another process claiming it is refused, naming where the first
// is connected from. One peer's failure (bad secret, garbage, a bad frame, a dead socket) closes
// that peer's connection with a logged reason; the server keeps serving everyone else.
#pragma once

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
  uint64_t shed = 0;  // of the rejected: dropped while authenticating, to make room for others
};

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
  struct Listener;  // the Asio acceptor and its I/O context
  struct Peer {
    // Destroyed, and its socket closed, the moment the peer is done: descriptors must not wait
    // for the next accept, which is what fails once they run out.
    std::unique_ptr<Connection> connection;
    std::jthread thread;  // the handler's, once authenticated
    SteadyClock::time_point handshake_until;
    bool done = false;           // guarded by mutex_
    bool authenticated = false;  // guarded by mutex_
    bool dropped = false;        // guarded by mutex_; shed, its thread on its way out
    // What the client said of itself, once admitted (guarded by mutex_): one live connection per
    // identity, save reconnections of the same process.
    std::string identity;
    uint64_t incarnation = 0;
  };

  // Acceptor thread: arms the next asynchronous accept; hands an accepted socket to the
  // handshake thread.
  void accept_next();
  void adopt(std::unique_ptr<TcpStream> stream);
  // Handshake thread: waits on every connection still authenticating (and on wake_, for new
  // ones), and moves each on as far as its socket allows.
  void handshake_loop(std::stop_token stop);
  // One step of a peer's handshake; once it is through, the handler's thread.
  void advance_handshake(Peer& peer);
  void wake_handshakes();
  void reap_finished_peers();
  // Shuts down the oldest connections still authenticating, at most `how_many`, saying why; their
  // threads then fail the handshake and finish. REQUIRES: mutex_ held.
  void shed_unauthenticated(size_t how_many, const char* why);
  size_t unauthenticated() const;  // REQUIRES: mutex_ held
  // An authenticated connection's thread: the handler.
  void serve(Peer& peer);
  // The handshake's admission of `peer`'s client: refused while another process holds a live
  // connection under the same identity. Takes mutex_.
  std::string admit(Peer& peer, const HandshakeParams& client);
  void finish(Peer& peer, uint64_t ServerStats::*counter);  // counts and marks the peer done

  const ServerOptions options_;
  const Handler handler_;
  std::unique_ptr<Listener> listener_;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_ = false;

  mutable std::mutex mutex_;
  mutable std::condition_variable stats_changed_;
  ServerStats stats_;        // guarded by mutex_
  std::list<Peer> peers_;    // guarded by mutex_; a list, so that a Peer never moves
  std::mutex stop_mutex_;    // serialises stop()
  int wake_[2] = {-1, -1};   // a pipe: adopt() tells the handshake thread of a new peer
  std::jthread handshaker_;  // started once everything above exists, joined after the acceptor
  std::jthread acceptor_;    // last: started once everything above exists, joined first
};

}  // namespace dtrain
