// TcpRing: forming the ring (hello, checks, refusal), the sender thread, and failure propagation.
#include "collective/tcp_ring.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include "base/cpu.h"
#include "base/error.h"
#include "collective/ring_protocol.h"

namespace dtrain {

namespace proto = ring_protocol;

int ring_spin_us(int ranks_here) { return ranks_here <= available_cores() ? 50 : 0; }

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
  // Bounds the blocking part: the left neighbour's hello. Chunks are read without blocking.
  server.connection.io_timeout_ms = options_.timeout_ms;
  server.connection.idle_timeout_ms = options_.timeout_ms;
  server_ = std::make_unique<Server>(std::move(server),
                                     [this](Connection& connection) { serve_left(connection); });
}

TcpRing::~TcpRing() {
  // Leaving with frames still queued means leaving in the middle of a collective: the ranks to
  // the right must hear it now rather than after their timeout. A frame half on the wire cannot
  // be finished (its memory may be gone by now), so then closing the link is the message.
  if (!failure_ && head_ < queue_.size() && !head_started_) {
    failure_ = std::make_exception_ptr(CollectiveError(
        fmt::format("{} stopped in the middle of a collective", rank_name(rank()))));
    send_abort(fmt::format("{} stopped in the middle of a collective", rank_name(rank())));
  }
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  membership_.notify_all();
  if (server_) server_->stop();  // serve_left returns, closing the left link
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
    throw CollectiveError(fmt::format("{} did not join the ring: {}{}", rank_name(right_rank()),
                                      error.what(), refusal_note()));
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
}

void TcpRing::wait_for_left(SteadyClock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (membership_.wait_until(lock, deadline, [&] { return left_ != nullptr; })) return;
  lock.unlock();
  throw CollectiveError(fmt::format("{} did not join the ring within {} s{}",
                                    rank_name(left_rank()), options_.timeout_ms / 1000.0,
                                    refusal_note()));
}

std::string TcpRing::refusal_note() {
  std::lock_guard lock(mutex_);
  return last_refusal_.empty() ? std::string()
                               : fmt::format(" (this rank refused a peer: {})", last_refusal_);
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
  membership_.notify_all();
  // The connection lives as long as this handler: hold it open until the ring is destroyed.
  membership_.wait(lock, [&] { return closing_; });
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
  throw_if_failed();
  queue_.push_back(Outgoing{data, tag, false});
  // Start at once: the kernel takes what fits while the caller goes on with its next chunk.
  try {
    pump_sends();
  } catch (const CollectiveError&) {
    throw;
  } catch (const TransportError& error) {
    fail(lost_message(right_rank(), error.what()), /*right_broken=*/true);
  }
}

void TcpRing::recv_left(std::span<float> into, ChunkTag tag) {
  throw_if_failed();
  progress(Want::kChunk, into, tag);
}

void TcpRing::wait_sent() {
  throw_if_failed();
  progress(Want::kSent, {}, {});
}

std::string TcpRing::lost_message(int peer, std::string_view what) const {
  return fmt::format("lost {}: {} (seen by {})", rank_name(peer), what, rank_name(rank()));
}

void TcpRing::progress(Want want, std::span<float> into, ChunkTag tag) {
  const auto timeout = std::chrono::milliseconds(options_.timeout_ms);
  const auto keepalive_every = timeout / 4;
  const auto spin = std::chrono::microseconds(options_.spin_us);
  const bool reading = want == Want::kChunk;
  auto now = SteadyClock::now();
  auto last_in = now;         // a byte came from the left (keepalives count)
  auto last_out = now;        // a byte went right, or nothing was waiting to
  auto last_progress = now;   // either
  auto last_keepalive = now;  // sent, or this wait began
  for (;;) {
    bool moved_out = false;
    bool done = false;
    bool moved_in = false;
    try {
      moved_out = pump_sends();
    } catch (const CollectiveError&) {
      throw;
    } catch (const TransportError& error) {
      fail(lost_message(right_rank(), error.what()), /*right_broken=*/true);
    }
    if (reading) {
      const uint64_t before = left_->bytes_moved();
      try {
        done = pump_receive(into, tag);
      } catch (const CollectiveError&) {
        throw;
      } catch (const TransportError& error) {
        fail(lost_message(left_rank(), error.what()), /*right_broken=*/false);
      }
      moved_in = left_->bytes_moved() != before;
    } else {
      done = head_ == queue_.size();
    }
    if (done) return;

    now = SteadyClock::now();
    if (moved_in) last_in = now;
    if (moved_out || head_ == queue_.size()) last_out = now;
    if (moved_in || moved_out) {
      last_progress = now;
      continue;
    }
    if (reading && now - last_in > timeout) {
      fail(lost_message(left_rank(),
                        fmt::format("timed out: no data for {} s", timeout.count() / 1000.0)),
           /*right_broken=*/false);
    }
    if (now - last_out > timeout) {
      fail(lost_message(right_rank(), fmt::format("timed out: it accepted no data for {} s",
                                                  timeout.count() / 1000.0)),
           /*right_broken=*/true);
    }
    // Tell the right neighbour we are alive and waiting, so that it does not blame us.
    if (head_ == queue_.size() && now - last_keepalive > keepalive_every) {
      queue_.push_back(Outgoing{{}, {}, true});
      last_keepalive = now;
      continue;
    }
    if (now - last_progress < spin) {
      std::this_thread::yield();
      continue;
    }
    auto until = last_keepalive + keepalive_every;
    if (reading) until = std::min(until, last_in + timeout);
    if (head_ < queue_.size()) until = std::min(until, last_out + timeout);
    wait_for_io(reading, until);
  }
}

bool TcpRing::pump_sends() {
  const uint64_t before = right_->bytes_moved();
  while (head_ < queue_.size()) {
    if (!head_started_) {
      const Outgoing& item = queue_[head_];
      send_meta_.clear();
      if (item.keepalive) {
        right_->start_send(proto::kRingKeepalive, 0, {}, {});
      } else {
        send_meta_.put(item.tag.op).put(item.tag.step).put(item.tag.chunk);
        const std::span<const float> tensors[] = {item.data};
        right_->start_send(proto::kRingChunk, 0, send_meta_.bytes(), tensors);
      }
      head_started_ = true;
    }
    if (!right_->continue_send()) break;
    head_started_ = false;
    ++head_;
  }
  if (head_ == queue_.size()) {
    queue_.clear();  // keeps its capacity: no allocation once the largest collective has run
    head_ = 0;
  }
  return right_->bytes_moved() != before;
}

bool TcpRing::pump_receive(std::span<float> into, ChunkTag tag) {
  while (!chunk_header_in_) {
    const std::optional<Connection::Incoming> in = left_->try_receive();
    if (!in) return false;
    if (in->type == proto::kRingKeepalive) continue;
    if (in->type == proto::kRingAbort) {
      fail(MetaReader(in->meta).rest_as_string(), /*right_broken=*/false);  // names the culprit
    }
    if (in->type != proto::kRingChunk) {
      fail(fmt::format("{} sent frame type {} in the middle of a collective", left_->peer(),
                       in->type),
           /*right_broken=*/false);
    }
    ChunkTag got;
    try {
      MetaReader reader(in->meta);
      got.op = reader.get<uint64_t>();
      got.step = reader.get<uint32_t>();
      got.chunk = reader.get<uint32_t>();
    } catch (const ShortMeta&) {
      fail(fmt::format("{} sent a malformed chunk header", left_->peer()), false);
    }
    incoming_bytes_ = in->tensor_bytes;
    chunk_header_in_ = true;
    if (!(got == tag) || in->tensor_bytes != into.size_bytes()) {
      fail(fmt::format(
               "{} sent {} ({} bytes) where {} expected {} ({} bytes): the ranks are not running "
               "the same collectives; check that every worker was started with the same flags",
               left_->peer(), to_string(got), in->tensor_bytes, rank_name(rank()), to_string(tag),
               into.size_bytes()),
           false);
    }
  }
  if (!left_->try_receive_tensors(into)) return false;
  chunk_header_in_ = false;
  return true;
}

void TcpRing::wait_for_io(bool reading, SteadyClock::time_point until) const {
  const auto left_ms =
      std::chrono::ceil<std::chrono::milliseconds>(until - SteadyClock::now()).count();
  const int timeout_ms = static_cast<int>(std::clamp<int64_t>(left_ms, 1, 1000));
  TcpStream::wait_either(reading ? &left_->stream() : nullptr,
                         head_ < queue_.size() ? &right_->stream() : nullptr, timeout_ms);
}

// ---- failure -----------------------------------------------------------------------------------

void TcpRing::abort(std::string_view reason) {
  if (failure_ || size() == 1) return;
  failure_ = std::make_exception_ptr(CollectiveError(std::string(reason)));
  send_abort(std::string(reason));
}

void TcpRing::fail(const std::string& message, bool right_broken) {
  if (!failure_) {
    failure_ = std::make_exception_ptr(CollectiveError(message));
    if (right_broken) {
      drain_left();
    } else {
      send_abort(message);
    }
  }
  std::rethrow_exception(failure_);
}

void TcpRing::send_abort(const std::string& message) {
  if (!right_) return;
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(options_.timeout_ms);
  // Only what is already on the wire must be finished: a frame cannot be cut short.
  queue_.resize(head_started_ ? head_ + 1 : head_);
  MetaWriter meta;
  meta.put_string(message);
  try {
    while (head_ < queue_.size()) {
      if (pump_sends()) continue;
      if (SteadyClock::now() > deadline) return;
      TcpStream::wait_either(nullptr, &right_->stream(), 100);
    }
    right_->start_send(proto::kRingAbort, 0, meta.bytes(), {});
    while (!right_->continue_send()) {
      if (SteadyClock::now() > deadline) return;
      TcpStream::wait_either(nullptr, &right_->stream(), 100);
    }
  } catch (const TransportError& error) {
    // The right neighbour is gone as well; the rank beyond it starts the abort from there.
    spdlog::debug("ring: could not pass the abort on to {}: {}", right_->peer(), error.what());
  }
  queue_.clear();
  head_ = 0;
  head_started_ = false;
}

void TcpRing::drain_left() {
  queue_.clear();
  head_ = 0;
  head_started_ = false;
  if (left_ == nullptr) return;
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(options_.timeout_ms);
  std::vector<float> sink;
  try {
    for (;;) {
      const uint64_t before = left_->bytes_moved();
      if (chunk_header_in_) {
        sink.resize(incoming_bytes_ / sizeof(float));
        if (left_->try_receive_tensors(sink)) chunk_header_in_ = false;
      } else if (const auto in = left_->try_receive()) {
        if (in->type == proto::kRingAbort) return;  // it has come round: the left one knows
        incoming_bytes_ = in->tensor_bytes;
        chunk_header_in_ = in->tensor_bytes > 0;
      }
      if (left_->bytes_moved() != before) continue;
      if (SteadyClock::now() > deadline) return;
      TcpStream::wait_either(&left_->stream(), nullptr, 100);
    }
  } catch (const TransportError&) {
    // The left neighbour has gone too (or sent junk): nothing is waiting on us any more.
  }
}

void TcpRing::throw_if_failed() const {
  if (failure_) std::rethrow_exception(failure_);
}

}  // namespace dtrain
