// One thread, the handshake thread, polls the listener and every connection still authenticating:
// it accepts, and moves each handshake on as its socket allows; an authenticated connection gets a
// thread of its own for the handler. Peers that have not authenticated are capped (the oldest
// dropped), and shed when descriptors run out; a dropped peer's socket is closed by the same thread
// before it accepts again, so that a flood by peers without the secret never holds the descriptors
// the workers need. A thread that cannot be started costs its one connection, never the process.
#include "comm/server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <asio.hpp>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "comm/handed_listeners.h"
#include "comm/tcp_congestion.h"

namespace dtrain {

namespace {

std::string endpoint_address(const asio::ip::tcp::endpoint& endpoint) {
  const auto address = endpoint.address();
  if (address.is_v6()) return fmt::format("[{}]:{}", address.to_string(), endpoint.port());
  return fmt::format("{}:{}", address.to_string(), endpoint.port());
}

std::string errno_text() { return std::strerror(errno); }

ServerOptions checked(ServerOptions options) {
  if (options.secret.empty()) throw UsageError("cannot serve: the cluster secret is empty");
  // Each connection is named by its own address; a task name here would label them all alike.
  options.connection.task_name.clear();
  return options;
}

// A listening socket that was bound for this server (comm/handed_listeners.h), made ready as
// listen_on makes its own.
int adopt_listener(int fd, const std::string& where, std::string_view tcp_congestion) {
  const int flags = ::fcntl(fd, F_GETFL);
  std::string why;
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    why = errno_text();
  } else if (const std::string congestion = apply_tcp_congestion(fd, tcp_congestion);
             !congestion.empty()) {
    why = fmt::format("TCP congestion control '{}': {}", tcp_congestion, congestion);
  }
  if (!why.empty()) {
    ::close(fd);
    throw TransportError(fmt::format("cannot listen on {}: {}", where, why));
  }
  return fd;
}

// A listening socket on host:port, non-blocking: it is accepted from when poll() finds it ready,
// and a peer that leaves meanwhile must not block the thread. Sets `port` to the bound one.
int listen_on(const std::string& host, uint16_t& port, std::string_view tcp_congestion) {
  const std::string where = fmt::format("{}:{}", host, port);
  asio::io_context io;
  asio::ip::tcp::resolver resolver(io);
  std::error_code ec;
  const auto endpoints =
      resolver.resolve(host, std::to_string(port), asio::ip::tcp::resolver::passive, ec);
  if (ec) throw TransportError(fmt::format("cannot listen on {}: {}", where, ec.message()));
  auto endpoint = endpoints.begin()->endpoint();
  if (const int handed = take_handed_listener(endpoint.data(), endpoint.size()); handed >= 0) {
    return adopt_listener(handed, where, tcp_congestion);
  }
  const int fd =
      ::socket(endpoint.protocol().family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) throw TransportError(fmt::format("cannot listen on {}: {}", where, errno_text()));
  // Accepted connections inherit the listener's congestion control.
  if (const std::string why = apply_tcp_congestion(fd, tcp_congestion); !why.empty()) {
    ::close(fd);
    throw TransportError(fmt::format("cannot listen on {}: TCP congestion control '{}': {}", where,
                                     tcp_congestion, why));
  }
  const int one = 1;
  socklen_t length = static_cast<socklen_t>(endpoint.capacity());
  // SO_REUSEADDR: a restarted task can bind its port while old connections sit in TIME_WAIT.
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      ::bind(fd, endpoint.data(), static_cast<socklen_t>(endpoint.size())) != 0 ||
      ::listen(fd, SOMAXCONN) != 0 || ::getsockname(fd, endpoint.data(), &length) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    throw TransportError(fmt::format("cannot listen on {}: {}", where, why));
  }
  endpoint.resize(length);
  port = endpoint.port();
  return fd;
}

// The kinds of rejection, as the warnings' summary and describe_rejections name them.
constexpr const char* kShed = "dropped while authenticating under load";
constexpr const char* kFailedAuthentication = "failed authentication";
constexpr const char* kMalformed = "sent no handshake";
constexpr const char* kLost = "hung up or timed out";

}  // namespace

std::string describe_rejections(const ServerStats& stats) {
  if (stats.rejected == 0) return "";
  const uint64_t lost = stats.rejected - stats.shed - stats.failed_authentication - stats.malformed;
  std::string kinds;
  for (const auto& [count, kind] : {std::pair{stats.shed, kShed},
                                    {stats.failed_authentication, kFailedAuthentication},
                                    {stats.malformed, kMalformed},
                                    {lost, kLost}}) {
    if (count > 0) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", count, kind);
  }
  return fmt::format("{} connection(s) rejected ({})", stats.rejected, kinds);
}

Server::Server(ServerOptions options, Handler handler)
    : options_(checked(std::move(options))), handler_(std::move(handler)) {
  port_ = options_.port;
  listen_fd_ = listen_on(options_.bind_host, port_, options_.connection.tcp_congestion);
  rejection_warnings_ = std::make_unique<RateLimitedWarning>(
      fmt::format("server on port {}", port_), "rejected connections");
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    const std::string why = errno_text();
    ::close(listen_fd_);
    throw TransportError(fmt::format("cannot serve on port {}: pipe: {}", port_, why));
  }
  hold_reserve();
  handshaker_ = std::jthread([this](std::stop_token stop) { handshake_loop(stop); });
}

Server::~Server() {
  stop();
  release_reserve();
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void Server::hold_reserve() {
  for (int& fd : reserve_) {
    if (fd < 0) fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
}

void Server::release_reserve() {
  for (int& fd : reserve_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

void Server::accept_pending() {
  for (;;) {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    const int fd =
        ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length, SOCK_CLOEXEC);
    if (fd >= 0) {
      // A connection takes its congestion control from the listener as it was when the peer
      // connected: one that waited in a handed listener's backlog (comm/handed_listeners.h) came
      // before this server set it.
      const std::string& congestion = options_.connection.tcp_congestion;
      if (!congestion.empty()) {
        if (const std::string why = apply_tcp_congestion(fd, congestion); !why.empty()) {
          spdlog::warn(
              "server on port {}: TCP congestion control '{}' of an accepted "
              "connection: {}",
              port_, congestion, why);
        }
      }
      adopt(fd, address, length);
      continue;
    }
    const int error = errno;
    if (error == EAGAIN || error == EWOULDBLOCK) return;
    // A connection that broke in the backlog costs only itself.
    if (error == EINTR || error == ECONNABORTED || error == EPROTO) continue;
    if (error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM) {
      // Before anything else, which may itself need a descriptor (a log line, a sanitizer's check).
      release_reserve();
      shed_unauthenticated(unauthenticated() / 2, "the server ran out of descriptors");
    }
    spdlog::warn("server on port {}: accept failed: {}", port_, std::strerror(error));
    // Typically EMFILE, which persists for a while: make room and retry later rather than spin.
    reap_finished_peers();
    accept_again_at_ = SteadyClock::now() + kAcceptRetry;
    return;
  }
}

void Server::adopt(int fd, const sockaddr_storage& address, socklen_t length) {
  asio::ip::tcp::endpoint remote;
  std::memcpy(remote.data(), &address, std::min<size_t>(length, remote.capacity()));
  remote.resize(std::min<size_t>(length, remote.capacity()));
  reap_finished_peers();
  std::unique_ptr<Connection> connection;
  try {
    connection = std::make_unique<Connection>(
        std::make_unique<TcpStream>(fd, endpoint_address(remote)), options_.connection);
  } catch (const TransportError& error) {
    // Its socket options could not be set (it broke between accept and now): this one peer's
    // failure, counted as a connection that never got through its handshake.
    {
      std::lock_guard lock(mutex_);
      ++stats_.accepted;
    }
    reject(nullptr, error);
    return;
  }
  // The oldest make room before the newest is counted: whoever sees it accepted sees them closed.
  const size_t cap = static_cast<size_t>(std::max(1, options_.max_unauthenticated));
  shed_unauthenticated(cap - 1, "too many connections were authenticating at once");
  std::lock_guard lock(mutex_);
  ++stats_.accepted;
  Peer& peer = peers_.emplace_back();
  peer.connection = std::move(connection);
  peer.handshake_until =
      SteadyClock::now() + std::chrono::milliseconds(options_.connection.handshake_timeout_ms);
  stats_changed_.notify_all();
}

void Server::wake_handshakes() {
  const char byte = 0;
  // A full pipe already holds a wake-up: nothing is lost when this write finds no room.
  [[maybe_unused]] const ssize_t ignored = ::write(wake_[1], &byte, 1);
}

void Server::handshake_loop(std::stop_token stop) {
  std::vector<pollfd> fds;
  std::vector<Peer*> waiting;
  while (!stop.stop_requested()) {
    const auto start = SteadyClock::now();
    const bool accepting = start >= accept_again_at_;
    if (accepting) hold_reserve();
    // poll() skips a negative descriptor: the listener rests while accepting is paced.
    fds.assign({pollfd{wake_[0], POLLIN, 0}, pollfd{accepting ? listen_fd_ : -1, POLLIN, 0}});
    waiting.clear();
    // The slice bounds how late a stop is noticed when nothing else wakes the thread.
    auto wake_at = start + std::chrono::seconds(1);
    if (!accepting) wake_at = std::min(wake_at, accept_again_at_);
    {
      std::lock_guard lock(mutex_);
      for (Peer& peer : peers_) {
        if (peer.done || peer.authenticated) continue;
        // Only this thread changes a connection still authenticating, or marks its peer done, so
        // the peer and its connection stay valid after the lock is released.
        const Connection& c = *peer.connection;
        const Waitable wait = c.waitable(!c.handshake_wants_write(), c.handshake_wants_write());
        fds.push_back(pollfd{wait.fd, static_cast<short>(wait.write ? POLLOUT : POLLIN), 0});
        waiting.push_back(&peer);
        wake_at = std::min(wake_at, peer.handshake_until);
      }
    }
    const auto timeout =
        std::chrono::ceil<std::chrono::milliseconds>(wake_at - SteadyClock::now()).count();
    if (::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, timeout))) < 0 &&
        errno != EINTR) {
      spdlog::error("server on port {}: poll failed: {}", port_, std::strerror(errno));
    }
    if (fds[0].revents != 0) {
      char drain[64];
      while (::read(wake_[0], drain, sizeof drain) > 0) {
      }
    }
    const auto now = SteadyClock::now();
    for (size_t i = 0; i < waiting.size(); ++i) {
      if (fds[i + 2].revents != 0 || now >= waiting[i]->handshake_until)
        advance_handshake(*waiting[i]);
    }
    // Last: accepting may shed, and so finish, peers in `waiting`.
    if (fds[1].revents != 0 && !stopping_) accept_pending();
    rejection_warnings_->flush_if_due();
  }
}

void Server::advance_handshake(Peer& peer) {
  Connection& connection = *peer.connection;
  try {
    if (SteadyClock::now() >= peer.handshake_until) {
      throw TransportError(
          connection.handshake_wants_write()
              ? fmt::format("timed out sending to {}", connection.peer())
              : fmt::format("timed out waiting for data from {}", connection.peer()));
    }
    const bool open = connection.continue_handshake_as_server(
        options_.secret, [&](const HandshakeParams& client) { return admit(peer, client); });
    if (!open) return;
  } catch (const std::exception& error) {
    // Nothing more is read from a peer that has not proved the secret.
    connection.close();
    reject(&peer, error);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    ++stats_.authenticated;
    peer.authenticated = true;
    stats_changed_.notify_all();
  }
  try {
    peer.thread = std::jthread([this, &peer] { serve(peer); });
  } catch (const std::system_error& error) {
    spdlog::warn("closed connection from {}: cannot start a thread for it: {}",
                 connection.address(), error.what());
    connection.close();
    finish(peer, &ServerStats::failed);
  }
}

size_t Server::unauthenticated() const {
  std::lock_guard lock(mutex_);
  return static_cast<size_t>(std::count_if(
      peers_.begin(), peers_.end(), [](const Peer& p) { return !p.done && !p.authenticated; }));
}

void Server::shed_unauthenticated(size_t keep, const char* why) {
  std::vector<std::unique_ptr<Connection>> dropped;
  {
    std::lock_guard lock(mutex_);
    size_t waiting = static_cast<size_t>(std::count_if(
        peers_.begin(), peers_.end(), [](const Peer& p) { return !p.done && !p.authenticated; }));
    for (auto peer = peers_.begin(); peer != peers_.end() && waiting > keep; ++peer) {  // oldest
      if (peer->done || peer->authenticated) continue;
      rejection_warnings_->warn(
          kShed, fmt::format("server on port {}: dropped the connection from {}, still "
                             "authenticating: {}",
                             port_, peer->connection->address(), why));
      dropped.push_back(std::move(peer->connection));
      peer->done = true;
      ++stats_.shed;
      ++stats_.rejected;
      --waiting;
    }
    stats_changed_.notify_all();
  }
  // Their sockets close here, before anything else is accepted: the descriptors are what a flood
  // takes, and what the next accept needs.
}

void Server::serve(Peer& peer) {
  Connection& connection = *peer.connection;
  try {
    handler_(connection);
    connection.close();
    finish(peer, &ServerStats::finished);
  } catch (const TransportError& error) {
    // The handler may have thrown FrameError itself (e.g. an unknown type): close in any case.
    connection.close();
    if (stopping_ || connection.closed_by_peer()) {
      spdlog::debug("connection from {} ended: {}", connection.address(), error.what());
      finish(peer, &ServerStats::finished);
    } else {
      spdlog::warn("closed connection: {}", error.what());
      finish(peer, &ServerStats::failed);
    }
  } catch (const std::exception& error) {
    connection.close();
    spdlog::error("closed connection from {}: the handler failed: {}", connection.address(),
                  error.what());
    finish(peer, &ServerStats::failed);
  }
}

std::string Server::admit(Peer& peer, const HandshakeParams& client) {
  std::lock_guard lock(mutex_);
  if (!client.identity.empty()) {
    for (const Peer& other : peers_) {
      // A reconnection of the same process is let in: its old connection may not have been
      // found dead yet (a cut link), and that process knows which one it uses.
      if (&other == &peer || other.done || other.identity != client.identity ||
          other.incarnation == client.incarnation()) {
        continue;
      }
      return fmt::format("{} is already connected from {}", client.identity,
                         other.connection->address());
    }
  }
  peer.identity = client.identity;
  peer.incarnation = client.incarnation();
  return "";
}

void Server::reject(Peer* peer, const std::exception& error) {
  const char* kind = kLost;
  uint64_t ServerStats::*counter = nullptr;
  if (dynamic_cast<const AuthError*>(&error) != nullptr) {
    kind = kFailedAuthentication;
    counter = &ServerStats::failed_authentication;
  } else if (dynamic_cast<const FrameError*>(&error) != nullptr) {
    kind = kMalformed;
    counter = &ServerStats::malformed;
  }
  if (!stopping_)
    rejection_warnings_->warn(kind, fmt::format("rejected connection: {}", error.what()));
  if (peer != nullptr) {
    finish(*peer, &ServerStats::rejected, counter);
    return;
  }
  std::lock_guard lock(mutex_);
  ++stats_.rejected;
  if (counter != nullptr) ++(stats_.*counter);
  stats_changed_.notify_all();
}

void Server::finish(Peer& peer, uint64_t ServerStats::*counter, uint64_t ServerStats::*why) {
  std::unique_ptr<Connection> ended;
  {
    std::lock_guard lock(mutex_);
    ++(stats_.*counter);
    if (why != nullptr) ++(stats_.*why);
    peer.done = true;
    ended = std::move(peer.connection);
    stats_changed_.notify_all();
  }
  // Closed here, by the peer's own thread: nothing else uses a done peer's connection.
}

void Server::reap_finished_peers() {
  std::list<Peer> finished;
  {
    std::lock_guard lock(mutex_);
    for (auto it = peers_.begin(); it != peers_.end();) {
      auto next = std::next(it);
      if (it->done) finished.splice(finished.end(), peers_, it);
      it = next;
    }
  }
  // Destroyed outside the lock: each jthread joins a thread that has finished serving (it may
  // still be returning), then its connection closes.
}

ServerStats Server::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

bool Server::wait_for(const std::function<bool(const ServerStats&)>& done,
                      std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return stats_changed_.wait_for(lock, timeout, [&] { return done(stats_); });
}

void Server::stop() {
  std::lock_guard stop_lock(stop_mutex_);
  stopping_ = true;
  if (handshaker_.joinable()) {
    handshaker_.request_stop();
    wake_handshakes();
    handshaker_.join();
  }
  rejection_warnings_->flush();
  if (listen_fd_ >= 0) ::close(listen_fd_);  // the handshake thread's until now
  listen_fd_ = -1;
  std::list<Peer> peers;
  {
    std::lock_guard lock(mutex_);
    // Under the lock: a peer that finishes meanwhile destroys its connection under it too.
    for (Peer& peer : peers_) {
      if (peer.connection) peer.connection->close();  // wakes every handler
    }
    peers.swap(peers_);
  }
  peers.clear();  // joins every thread
}

}  // namespace dtrain
