// TcpRing: forming the ring (hello, checks, refusal), the sender thread, and failure propagation.
#include "collective/tcp_ring.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <stdexcept>
#include <utility>

#include "base/error.h"
#include "collective/ring_protocol.h"

namespace dtrain {

namespace proto = ring_protocol;

TcpRing::TcpRing(TcpRingOptions options) : options_(std::move(options)) {
  if (options_.size < 1 || options_.rank < 0 || options_.rank >= options_.size) {
    throw std::invalid_argument(
        fmt::format("TcpRing: rank {} of a ring of {}", options_.rank, options_.size));
  }
  if (options_.size == 1) return;
  ServerOptions server;
  server.bind_host = options_.bind_host;
  server.port = options_.port;
  server.secret = options_.secret;
  // A rank that sends nothing for this long is stuck or gone: between collectives its neighbours
  // are computing, which must take less than this.
  server.connection.io_timeout_ms = options_.timeout_ms;
  server.connection.idle_timeout_ms = options_.timeout_ms;
  server_ = std::make_unique<Server>(std::move(server),
                                     [this](Connection& connection) { serve_left(connection); });
}

TcpRing::~TcpRing() {
  {
    std::lock_guard lock(mutex_);
    // Leaving with messages still queued means leaving in the middle of a collective: the ranks
    // to the right must hear it now rather than after their timeout.
    if (head_ < queue_.size() || sending_data_) {
      record_failure(fmt::format("{} stopped in the middle of a collective", rank_name(rank())),
                     false);
    }
    closing_ = true;
  }
  changed_.notify_all();
  if (sender_.joinable()) sender_.join();  // it sends a pending abort first
  if (server_) server_->stop();            // serve_left returns, closing the left link
  if (right_) right_->close();
}

uint16_t TcpRing::port() const { return server_ ? server_->port() : options_.port; }

std::string TcpRing::rank_name(int rank) const { return fmt::format("{}{}", options_.job, rank); }

int TcpRing::left_rank() const { return (rank() + size() - 1) % size(); }

int TcpRing::right_rank() const { return (rank() + 1) % size(); }

// ---- forming the ring --------------------------------------------------------------------------

void TcpRing::connect(const HostPort& right) {
  if (size() == 1) return;
  if (right_) throw std::logic_error("TcpRing::connect called twice");
  const auto deadline =
      SteadyClock::now() + std::chrono::milliseconds(std::max(options_.timeout_ms, 0));
  ConnectionOptions options;
  options.task_name = rank_name(right_rank());
  options.io_timeout_ms = options_.timeout_ms;
  options.idle_timeout_ms = options_.timeout_ms;
  options.connect_timeout_ms = options_.timeout_ms;
  try {
    right_ = dtrain::connect(right.host, right.port, options_.secret, options);
  } catch (const AuthError&) {
    throw;
  } catch (const TransportError& error) {
    throw CollectiveError(
        fmt::format("{} did not join the ring: {}", rank_name(right_rank()), error.what()));
  }
  MetaWriter hello;
  hello.put(static_cast<int32_t>(size()))
      .put(static_cast<int32_t>(rank()))
      .put(options_.fingerprint);
  right_->send(proto::kRingHello, 0, hello.bytes(), {});
  const Connection::Incoming answer = right_->receive();
  if (answer.type == proto::kRingRefused) {
    throw CollectiveError(fmt::format("{} refused {}: {}", right_->peer(), rank_name(rank()),
                                      MetaReader(answer.meta).rest_as_string()));
  }
  if (answer.type != proto::kRingWelcome) {
    throw FrameError(
        fmt::format("{} answered the ring hello with frame type {}", right_->peer(), answer.type));
  }
  wait_for_left(deadline);
  sender_ = std::jthread([this] { send_loop(); });
}

void TcpRing::wait_for_left(SteadyClock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (changed_.wait_until(lock, deadline, [&] { return left_ != nullptr; })) return;
  throw CollectiveError(fmt::format(
      "{} did not join the ring within {} s{}", rank_name(left_rank()),
      options_.timeout_ms / 1000.0,
      last_refusal_.empty() ? "" : fmt::format(" (a peer was refused: {})", last_refusal_)));
}

void TcpRing::serve_left(Connection& connection) {
  const Connection::Incoming hello = connection.receive();
  if (hello.type != proto::kRingHello) {
    throw FrameError(fmt::format("{} sent frame type {} where a ring hello was expected",
                                 connection.peer(), hello.type));
  }
  MetaReader reader(hello.meta);
  const auto ring_size = reader.get<int32_t>();
  const auto peer_rank = reader.get<int32_t>();
  const auto fingerprint = reader.get<uint64_t>();
  std::string refusal = refusal_for(ring_size, peer_rank, fingerprint, connection.peer());
  {
    std::lock_guard lock(mutex_);
    if (refusal.empty() && (left_ != nullptr || closing_)) {
      refusal = fmt::format("{} already has its left neighbour", rank_name(rank()));
    }
    if (!refusal.empty()) last_refusal_ = refusal;
  }
  if (!refusal.empty()) {
    spdlog::warn("ring: refused {}: {}", connection.peer(), refusal);
    MetaWriter reason;
    reason.put_string(refusal);
    connection.send(proto::kRingRefused, 0, reason.bytes(), {});
    return;
  }
  connection.set_task_name(rank_name(left_rank()));
  connection.send(proto::kRingWelcome, 0, {}, {});
  std::unique_lock lock(mutex_);
  left_ = &connection;
  changed_.notify_all();
  // The connection lives as long as this handler: hold it open until the ring is destroyed.
  changed_.wait(lock, [&] { return closing_; });
}

std::string TcpRing::refusal_for(int ring_size, int peer_rank, uint64_t fingerprint,
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

// ---- moving chunks -----------------------------------------------------------------------------

void TcpRing::send_right(std::span<const float> data, ChunkTag tag) {
  {
    std::lock_guard lock(mutex_);
    throw_if_failed();
    queue_.push_back(Outgoing{data, tag});
  }
  changed_.notify_all();
}

void TcpRing::recv_left(std::span<float> into, ChunkTag tag) {
  {
    std::lock_guard lock(mutex_);
    throw_if_failed();
  }
  std::string failure;
  try {
    const Connection::Incoming in = left_->receive();
    if (in.type == proto::kRingChunk) {
      MetaReader reader(in.meta);
      ChunkTag got;
      got.op = reader.get<uint64_t>();
      got.step = reader.get<uint32_t>();
      got.chunk = reader.get<uint32_t>();
      if (got == tag && in.tensor_bytes == into.size_bytes()) {
        left_->receive_tensors(std::span(&into, 1));
        return;
      }
      failure = fmt::format(
          "{} sent {} ({} bytes) where {} expected {} ({} bytes): the ranks are not running the "
          "same collectives; check that every worker was started with the same flags",
          left_->peer(), to_string(got), in.tensor_bytes, rank_name(rank()), to_string(tag),
          into.size_bytes());
    } else if (in.type == proto::kRingAbort) {
      failure = MetaReader(in.meta).rest_as_string();  // already names the rank at fault
    } else {
      failure = fmt::format("{} sent frame type {} in the middle of a collective", left_->peer(),
                            in.type);
    }
  } catch (const TransportError& error) {
    failure = fmt::format("lost {}: {} (seen by {})", rank_name(left_rank()), error.what(),
                          rank_name(rank()));
  } catch (const ShortMeta&) {
    failure = fmt::format("{} sent a malformed chunk header", left_->peer());
  }
  fail(failure);
}

void TcpRing::wait_sent() {
  std::unique_lock lock(mutex_);
  // Bounded: the sender gives up on a send after timeout_ms without progress, recording a failure.
  changed_.wait(lock, [&] { return failure_ || (head_ == queue_.size() && !sending_data_); });
  throw_if_failed();
}

void TcpRing::send_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return abort_ || head_ < queue_.size() || closing_; });
    if (abort_) {
      const std::string reason = std::exchange(abort_, std::nullopt).value();
      lock.unlock();
      send_abort_frame(reason);
      lock.lock();
    } else if (head_ < queue_.size()) {
      const Outgoing item = queue_[head_++];
      if (head_ == queue_.size()) {
        queue_.clear();  // keeps its capacity: no allocation once the largest collective ran
        head_ = 0;
      }
      sending_data_ = true;
      lock.unlock();
      std::string error;
      try {
        send_frame(item);
      } catch (const TransportError& e) {
        error = e.what();
      }
      lock.lock();
      sending_data_ = false;
      if (!error.empty()) {
        record_failure(fmt::format("lost {}: {} (seen by {})", rank_name(right_rank()), error,
                                   rank_name(rank())),
                       true);
      }
      changed_.notify_all();
    } else {
      return;  // closing, and nothing left to send
    }
  }
}

void TcpRing::send_frame(const Outgoing& item) {
  send_meta_.clear();
  send_meta_.put(item.tag.op).put(item.tag.step).put(item.tag.chunk);
  const std::span<const float> tensors[] = {item.data};
  right_->send(proto::kRingChunk, 0, send_meta_.bytes(), tensors);
}

void TcpRing::send_abort_frame(const std::string& reason) {
  try {
    MetaWriter meta;
    meta.put_string(reason);
    right_->send(proto::kRingAbort, 0, meta.bytes(), {});
  } catch (const TransportError& error) {
    // The right neighbour is gone too; it has its own right neighbour to tell.
    spdlog::debug("ring: could not pass the abort on to {}: {}", right_->peer(), error.what());
  }
}

// ---- failure -----------------------------------------------------------------------------------

void TcpRing::abort(std::string_view reason) {
  {
    std::lock_guard lock(mutex_);
    record_failure(std::string(reason), false);
  }
  changed_.notify_all();
}

void TcpRing::fail(const std::string& message) {
  std::unique_lock lock(mutex_);
  record_failure(message, false);
  // The sender may still be reading a chunk of the caller's buffer, which the caller may free once
  // we throw: let that send finish, or cut it short after the timeout.
  const auto patience = std::chrono::milliseconds(std::max(options_.timeout_ms, 0));
  if (!changed_.wait_for(lock, patience, [&] { return !sending_data_; })) {
    right_->close();
    changed_.wait(lock, [&] { return !sending_data_; });
  }
  std::rethrow_exception(failure_);
}

void TcpRing::record_failure(const std::string& message, bool right_broken) {
  if (failure_) return;
  failure_ = std::make_exception_ptr(CollectiveError(message));
  queue_.clear();
  head_ = 0;
  // Tell the ranks to the right, unless the right link is what broke: then the rank beyond it
  // finds its own left link broken and starts the abort from there.
  if (!right_broken && right_) abort_ = message;
  changed_.notify_all();
}

void TcpRing::throw_if_failed() const {
  if (failure_) std::rethrow_exception(failure_);
}

}  // namespace dtrain
