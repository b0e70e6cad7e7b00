// The acceptor runs Asio's asynchronous accept on its own thread (so stop() can cancel it); each
// accepted socket leaves Asio for a TcpStream and joins the handshake thread's poll, which moves
// every handshake on as its socket allows; an authenticated connection gets a thread of its own
// for the handler. Peers that have not authenticated are capped (the oldest dropped), their
// sockets closed as soon as they are done, and shed when descriptors run out, so that a flood by
// peers without the secret never locks the workers out; a thread that cannot be started costs its
// one connection, never the process.
#include "comm/server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <asio.hpp>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

#include "base/error.h"

namespace dtrain {

struct Server::Listener {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor{io};
  asio::steady_timer retry{io};  // paces accept after a failure such as running out of files
};

namespace {

std::string endpoint_address(const asio::ip::tcp::endpoint& endpoint) {
  const auto address = endpoint.address();
  if (address.is_v6()) return fmt::format("[{}]:{}", address.to_string(), endpoint.port());
  return fmt::format("{}:{}", address.to_string(), endpoint.port());
}

// The accepted socket leaves Asio for a TcpStream; nullptr if the peer has already gone.
std::unique_ptr<TcpStream> take_stream(asio::ip::tcp::socket& socket) {
  std::error_code ec;
  const auto remote = socket.remote_endpoint(ec);
  if (ec) return nullptr;  // the socket's destructor closes it
  try {
    return std::make_unique<TcpStream>(socket.release(), endpoint_address(remote));
  } catch (const TransportError& error) {
    spdlog::warn("rejected connection: {}", error.what());
    return nullptr;
  }
}

ServerOptions checked(ServerOptions options) {
  if (options.secret.empty()) throw UsageError("cannot serve: the cluster secret is empty");
  // Each connection is named by its own address; a task name here would label them all alike.
  options.connection.task_name.clear();
  return options;
}

}  // namespace

Server::Server(ServerOptions options, Handler handler)
    : options_(checked(std::move(options))),
      handler_(std::move(handler)),
      listener_(std::make_unique<Listener>()) {
  const std::string where = fmt::format("{}:{}", options_.bind_host, options_.port);
  std::error_code ec;
  asio::ip::tcp::resolver resolver(listener_->io);
  const auto endpoints = resolver.resolve(options_.bind_host, std::to_string(options_.port),
                                          asio::ip::tcp::resolver::passive, ec);
  if (ec) throw TransportError(fmt::format("cannot listen on {}: {}", where, ec.message()));
  const auto endpoint = endpoints.begin()->endpoint();
  auto& acceptor = listener_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  // SO_REUSEADDR: a restarted task can bind its port while old connections sit in TIME_WAIT.
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw TransportError(fmt::format("cannot listen on {}: {}", where, ec.message()));
  port_ = acceptor.local_endpoint().port();
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw TransportError(fmt::format("cannot serve on {}: pipe: {}", where, std::strerror(errno)));
  }

  handshaker_ = std::jthread([this](std::stop_token stop) { handshake_loop(stop); });
  accept_next();
  acceptor_ = std::jthread([this] { listener_->io.run(); });
}

Server::~Server() {
  stop();
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void Server::accept_next() {
  listener_->acceptor.async_accept([this](std::error_code ec, asio::ip::tcp::socket socket) {
    // stop() closed the acceptor: leave the handler unarmed so io.run() returns.
    if (ec == asio::error::operation_aborted || stopping_) return;
    if (ec) {
      // Typically EMFILE, which persists for a while: make room and retry later rather than spin.
      spdlog::warn("server on port {}: accept failed: {}", port_, ec.message());
      if (ec == asio::error::no_descriptors || ec == std::errc::too_many_files_open_in_system) {
        std::lock_guard lock(mutex_);
        shed_unauthenticated(std::max<size_t>(1, unauthenticated() / 2),
                             "the server ran out of descriptors");
      }
      reap_finished_peers();
      listener_->retry.expires_after(std::chrono::milliseconds(100));
      listener_->retry.async_wait([this](std::error_code wait_ec) {
        if (!wait_ec && !stopping_) accept_next();
      });
      return;
    }
    if (auto stream = take_stream(socket)) adopt(std::move(stream));
    accept_next();
  });
}

void Server::adopt(std::unique_ptr<TcpStream> stream) {
  reap_finished_peers();
  std::unique_ptr<Connection> connection;
  try {
    connection = std::make_unique<Connection>(std::move(stream), options_.connection);
  } catch (const TransportError& error) {
    // Its socket options could not be set (it broke between accept and now): this one peer's
    // failure, counted as a connection that never got through its handshake.
    spdlog::warn("rejected connection: {}", error.what());
    std::lock_guard lock(mutex_);
    ++stats_.accepted;
    ++stats_.rejected;
    stats_changed_.notify_all();
    return;
  }
  std::lock_guard lock(mutex_);
  ++stats_.accepted;
  const size_t cap = static_cast<size_t>(std::max(1, options_.max_unauthenticated));
  if (unauthenticated() >= cap) {
    shed_unauthenticated(unauthenticated() - cap + 1,
                         "too many connections were authenticating at once");
  }
  Peer& peer = peers_.emplace_back();
  peer.connection = std::move(connection);
  peer.handshake_until =
      SteadyClock::now() + std::chrono::milliseconds(options_.connection.handshake_timeout_ms);
  stats_changed_.notify_all();
  wake_handshakes();
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
    fds.assign(1, pollfd{wake_[0], POLLIN, 0});
    waiting.clear();
    // The slice bounds how late a stop is noticed when nothing else wakes the thread.
    auto wake_at = SteadyClock::now() + std::chrono::seconds(1);
    {
      std::lock_guard lock(mutex_);
      for (Peer& peer : peers_) {
        if (peer.done || peer.authenticated) continue;
        // Only this thread changes a connection still authenticating, or marks its peer done, so
        // the peer and its connection stay valid after the lock is released.
        const Connection& c = *peer.connection;
        fds.push_back(pollfd{c.stream().native_handle(),
                             static_cast<short>(c.handshake_wants_write() ? POLLOUT : POLLIN), 0});
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
      if (fds[i + 1].revents != 0 || now >= waiting[i]->handshake_until)
        advance_handshake(*waiting[i]);
    }
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
    if (!stopping_) spdlog::warn("rejected connection: {}", error.what());
    finish(peer, &ServerStats::rejected);
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
  return static_cast<size_t>(std::count_if(
      peers_.begin(), peers_.end(), [](const Peer& p) { return !p.done && !p.authenticated; }));
}

void Server::shed_unauthenticated(size_t how_many, const char* why) {
  for (Peer& peer : peers_) {  // oldest first
    if (how_many == 0) break;
    if (peer.done || peer.authenticated || peer.dropped) continue;
    spdlog::warn("server on port {}: dropped the connection from {}, still authenticating: {}",
                 port_, peer.connection->address(), why);
    peer.connection->close();
    peer.dropped = true;
    ++stats_.shed;
    --how_many;
  }
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
          other.incarnation == client.incarnation) {
        continue;
      }
      return fmt::format("{} is already connected from {}", client.identity,
                         other.connection->address());
    }
  }
  peer.identity = client.identity;
  peer.incarnation = client.incarnation;
  return "";
}

void Server::finish(Peer& peer, uint64_t ServerStats::*counter) {
  std::unique_ptr<Connection> ended;
  {
    std::lock_guard lock(mutex_);
    ++(stats_.*counter);
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
  if (acceptor_.joinable()) {
    // The acceptor belongs to the acceptor thread; closing it there cancels the pending accept
    // (or retry), after which io.run() runs out of work and returns.
    asio::post(listener_->io, [this] {
      std::error_code ec;
      listener_->acceptor.close(ec);
      listener_->retry.cancel();
    });
    acceptor_.join();
  }
  if (handshaker_.joinable()) {
    handshaker_.request_stop();
    wake_handshakes();
    handshaker_.join();
  }
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
