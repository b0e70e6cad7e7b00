// RingFormation: the hello and its checks, and refusals; the server's thread runs the left
// neighbour's side.
#include "collective/ring_formation.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <utility>

#include "base/error.h"
#include "collective/ring_protocol.h"
#include "comm/connect.h"
#include "comm/meta_codec.h"
#include "comm/transport.h"

namespace dtrain {

namespace proto = ring_protocol;

RingFormation::RingFormation(RingOptions options) : options_(std::move(options)) {
  if (options_.size < 1 || options_.rank < 0 || options_.rank >= options_.size) {
    throw std::invalid_argument(
        fmt::format("RingFormation: rank {} of a ring of {}", options_.rank, options_.size));
  }
  if (options_.size == 1) return;
  ServerOptions server;
  server.bind_host = options_.bind_host;
  server.port = options_.port;
  server.secret = options_.secret;
  server.connection = connection_options();
  server_ = std::make_unique<Server>(std::move(server),
                                     [this](Connection& connection) { serve_left(connection); });
}

RingFormation::~RingFormation() { close(); }

ConnectionOptions RingFormation::connection_options() const {
  ConnectionOptions options;
  options.authenticate_frames = options_.authenticate_frames;
  options.tcp_congestion = options_.tcp_congestion;
  options.type_carries_tensors = proto::carries_tensors;
  options.identity = rank_name(options_.rank);
  options.transport = options_.transport;
  // Bounds the blocking part: the hello and the link step. Chunks move without blocking.
  options.io_timeout_ms = options_.timeout_ms;
  options.idle_timeout_ms = options_.timeout_ms;
  // The ring's own keepalives find a lost neighbour within timeout_ms; the kernel's must not
  // declare one lost sooner.
  options.liveness_timeout_ms = options_.timeout_ms;
  return options;
}

void RingFormation::close() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  membership_.notify_all();
  if (server_) server_->stop();  // serve_left returns, closing the left link
  if (right_) right_->close();
}

uint16_t RingFormation::port() const { return server_ ? server_->port() : options_.port; }

std::string RingFormation::rank_name(int rank) const {
  if (rank >= 0 && rank < static_cast<int>(options_.names.size())) return options_.names[rank];
  return fmt::format("{}{}", options_.job, rank);
}

Connection* RingFormation::connection(Side side) {
  if (side == Side::kRight) return right_.get();
  std::lock_guard lock(mutex_);
  return left_;
}

void RingFormation::connect(const HostPort& right) {
  if (size() == 1) return;
  if (right_) throw std::logic_error("RingFormation::connect called twice");
  const auto deadline =
      SteadyClock::now() + std::chrono::milliseconds(std::max(options_.timeout_ms, 0));
  ConnectionOptions options = connection_options();
  options.task_name = rank_name(right_rank());
  options.connect_timeout_ms = options_.timeout_ms;
  options.stop = options_.stop;
  options.wait_report = options_.wait_report;
  options.wait_report_interval_ms = options_.wait_report_interval_ms;
  options.abandon_wait = [this] {
    if (std::string why = interrupted(); !why.empty()) return why;
    return final_refusal();
  };
  try {
    right_ = dtrain::connect(right.host, right.port, options_.secret, options);
  } catch (const LinkRefused& error) {
    throw CollectiveError(error.what());
  } catch (const AuthError&) {
    throw;
  } catch (const TransportError& error) {
    if (std::string refused = final_refusal(); !refused.empty()) throw CollectiveError(refused);
    throw CollectiveError(fmt::format("{} did not join the ring: {}{}", rank_name(right_rank()),
                                      error.what(), refusal_note()));
  }
  MetaWriter hello;
  hello.put(static_cast<int32_t>(size()))
      .put(static_cast<int32_t>(rank()))
      .put(options_.fingerprint);
  Connection::Incoming answer;
  try {
    right_->send(proto::kRingHello, 0, hello.bytes(), {});
    answer = right_->receive();
  } catch (const LinkRefused& error) {
    throw CollectiveError(error.what());  // the right neighbour refused our link
  } catch (const TransportError&) {
    // A right neighbour this rank refused as its left one (a ring of two) gives up and closes:
    // the refusal is the cause, the closed connection only its echo.
    std::string refused;
    {
      std::lock_guard lock(mutex_);
      refused = final_refusal_;
    }
    if (!refused.empty()) throw CollectiveError(refused);
    throw;
  }
  if (answer.type == proto::kRingRefused) {
    throw CollectiveError(fmt::format("{} refused {}: {}", right_->peer(), rank_name(rank()),
                                      MetaReader(answer.meta).rest_as_peer_text()));
  }
  if (answer.type != proto::kRingWelcome) {
    throw FrameError(
        fmt::format("{} answered the ring hello with frame type {}", right_->peer(), answer.type));
  }
  wait_for_left(deadline);
}

void RingFormation::wait_for_left(SteadyClock::time_point deadline) {
  std::unique_lock lock(mutex_);
  // Without an interrupt, one wait; with one, slices of it, each followed by a look at it.
  const auto slice = std::chrono::milliseconds(20);
  for (;;) {
    const auto until =
        options_.interrupt != nullptr ? std::min(deadline, SteadyClock::now() + slice) : deadline;
    if (membership_.wait_until(lock, until,
                               [&] { return left_ != nullptr || !left_failure_.empty(); })) {
      if (left_ != nullptr) return;
      throw CollectiveError(left_failure_);
    }
    if (SteadyClock::now() >= deadline) break;
    lock.unlock();
    if (std::string why = interrupted(); !why.empty()) throw CollectiveError(why);
    lock.lock();
  }
  lock.unlock();
  throw CollectiveError(fmt::format("{} did not join the ring within {} s{}",
                                    rank_name(left_rank()), options_.timeout_ms / 1000.0,
                                    refusal_note()));
}

void RingFormation::give_up_forming() {
  std::lock_guard lock(mutex_);
  if (final_refusal_.empty() || !left_failure_.empty()) return;
  left_failure_ = final_refusal_;
  membership_.notify_all();
}

std::string RingFormation::interrupted() const {
  const RingInterrupt* interrupt = options_.interrupt;
  return interrupt != nullptr && interrupt->raised() > options_.view ? interrupt->why() : "";
}

std::string RingFormation::final_refusal() {
  std::lock_guard lock(mutex_);
  return left_failure_.empty() ? std::string() : final_refusal_;
}

std::string RingFormation::refusal_note() {
  std::lock_guard lock(mutex_);
  return last_refusal_.empty() ? std::string()
                               : fmt::format(" (this rank refused a peer: {})", last_refusal_);
}

void RingFormation::serve_left(Connection& connection) {
  Connection::Incoming hello;
  try {
    hello = connection.receive();  // after the link step, which the connection answers first
  } catch (const LinkRefused& error) {
    // --transport shm, and the left neighbour cannot have it: this rank's wait ends with why.
    std::lock_guard lock(mutex_);
    last_refusal_ = error.what();
    left_failure_ = error.what();
    membership_.notify_all();
    throw;
  }
  if (hello.type != proto::kRingHello) {
    throw FrameError(fmt::format("{} sent frame type {} where a ring hello was expected",
                                 connection.peer(), hello.type));
  }
  MetaReader reader(hello.meta);
  const auto ring_size = reader.get<int32_t>();
  const auto peer_rank = reader.get<int32_t>();
  const auto fingerprint = reader.get<uint64_t>();
  std::string refusal = refusal_for(ring_size, peer_rank, fingerprint, connection.peer());
  const bool final = !refusal.empty();
  {
    std::lock_guard lock(mutex_);
    if (refusal.empty() && (left_ != nullptr || closing_)) {
      refusal = fmt::format("{} already has its left neighbour", rank_name(rank()));
    }
    if (!refusal.empty()) last_refusal_ = refusal;
    // Known at once, so that the echo of this refusal (the peer giving up and closing) is
    // explained by it; acted on once the peer has been told (give_up_forming).
    if (final && final_refusal_.empty()) {
      final_refusal_ = fmt::format("{} refused its left neighbour: {}", rank_name(rank()), refusal);
    }
  }
  if (!refusal.empty()) {
    spdlog::warn("ring: refused {}: {}", connection.peer(), refusal);
    MetaWriter reason;
    reason.put_string(refusal);
    // Sent before this rank gives up on the ring, so that the refused peer reads why rather than
    // a closed connection when this process exits.
    try {
      connection.send(proto::kRingRefused, 0, reason.bytes(), {});
    } catch (...) {
      if (final) give_up_forming();
      throw;
    }
    if (final) give_up_forming();
    return;
  }
  connection.set_task_name(rank_name(left_rank()));
  connection.send(proto::kRingWelcome, 0, {}, {});
  std::unique_lock lock(mutex_);
  left_ = &connection;
  membership_.notify_all();
  // The connection lives as long as this handler: hold it open until the ring is destroyed.
  membership_.wait(lock, [&] { return closing_; });
}

std::string RingFormation::refusal_for(int ring_size, int peer_rank, uint64_t fingerprint,
                                       std::string_view peer) const {
  if (ring_size != size()) {
    return fmt::format(
        "{} runs a ring of {} ranks but {} was started with {}: every worker needs the same "
        "worker list",
        peer, ring_size, rank_name(rank()), size());
  }
  if (peer_rank != left_rank()) {
    return fmt::format(
        "{} says it is {} but {}'s left neighbour is {}: the workers are listed in another order "
        "than those tasks were started with",
        peer, rank_name(peer_rank), rank_name(rank()), rank_name(left_rank()));
  }
  if (fingerprint != options_.fingerprint) {
    return fmt::format(
        "{} ({}) runs another model or configuration (fingerprint {:016x}, {} has {:016x}): check "
        "--model and the flags that shape the parameters",
        peer, rank_name(peer_rank), fingerprint, rank_name(rank()), options_.fingerprint);
  }
  return {};
}

}  // namespace dtrain
