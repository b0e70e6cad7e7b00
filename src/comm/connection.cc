// Frames over a TcpStream: the streaming send and receive paths, the frames the handshake
// (comm/handshake.cc) exchanges, and the rule that a failed connection stays failed.
#include "comm/connection.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <stdexcept>

#include "base/crc32c.h"
#include "base/error.h"
#include "comm/auth.h"
#include "comm/frame.h"
#include "comm/handshake.h"
#include "comm/local_address.h"
#include "comm/tcp_congestion.h"
#include "comm/transport_counters.h"

namespace dtrain {

namespace ff = frame_format;

Connection::Connection(std::unique_ptr<TcpStream> stream, ConnectionOptions options)
    : stream_(std::move(stream)),
      options_(std::move(options)),
      writer_(*stream_, options_.max_meta_bytes, options_.max_payload_bytes),
      reader_(*stream_, options_.max_meta_bytes, options_.type_carries_tensors) {
  if (options_.identity.size() > kMaxIdentityBytes) {
    throw std::invalid_argument(fmt::format("connection identity \"{}\" is over {} bytes",
                                            options_.identity, kMaxIdentityBytes));
  }
  stream_->set_task_name(options_.task_name);
  if (options_.incarnation != 0) test_key_.emplace(ProcessKey::from_seed(options_.incarnation));
  if (options_.liveness_timeout_ms > 0) stream_->set_liveness_timeout(options_.liveness_timeout_ms);
}

Connection::~Connection() = default;  // the stream's destructor closes the socket

// ---- state ----

void Connection::fail(std::exception_ptr error, bool by_peer) {
  std::exception_ptr first;
  bool was_open = false, first_failure = false;
  {
    std::lock_guard lock(mutex_);
    if (state_ != State::kClosed) {
      was_open = state_ == State::kOpen;
      first_failure = true;
      state_ = State::kClosed;
      error_ = error;
      closed_by_peer_ = by_peer;
    }
    first = error_;
  }
  if (first_failure) count_rejection(error, was_open);
  // Wakes a thread blocked in the other direction; it finds the connection closed and rethrows
  // the first error rather than its own consequence of the shutdown.
  stream_->shutdown();
  std::rethrow_exception(first);
}

void Connection::count_rejection(const std::exception_ptr& error, bool was_open) const {
  std::string reason;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    reason = rejection_reason(e);
  } catch (...) {
  }
  if (reason.empty()) return;
  // A peer that never proved the secret is its host: its ports are as many as its attempts.
  const std::string& address = stream_->address();
  const std::string peer =
      was_open ? peer_label(peer_params_.identity) : address.substr(0, address.rfind(':'));
  TransportCounters::process().rejected(peer, was_open, reason);
}

void Connection::count_sent(std::span<const std::byte> meta,
                            std::span<const std::span<const float>> tensors) {
  if (traffic_ == nullptr) return;
  uint64_t bytes = ff::kHeaderBytes + meta.size();
  for (const std::span<const float> tensor : tensors) bytes += tensor.size_bytes();
  traffic_->sent.fetch_add(bytes, std::memory_order_relaxed);
}

void Connection::check_state(State required, const char* call) const {
  std::lock_guard lock(mutex_);
  if (state_ == State::kClosed) std::rethrow_exception(error_);
  if (state_ != required) {
    throw std::logic_error(fmt::format("Connection::{} called {} the handshake", call,
                                       state_ == State::kHandshaking ? "before" : "after"));
  }
}

void Connection::close() {
  {
    std::lock_guard lock(mutex_);
    if (state_ != State::kClosed) {
      state_ = State::kClosed;
      error_ = std::make_exception_ptr(
          TransportError(fmt::format("connection to {} was closed locally", peer())));
    }
  }
  stream_->shutdown();
}

bool Connection::is_open() const {
  std::lock_guard lock(mutex_);
  return state_ == State::kOpen;
}

bool Connection::closed_by_peer() const {
  std::lock_guard lock(mutex_);
  return closed_by_peer_;
}

IoDeadline Connection::io_deadline() const {
  return IoDeadline{.stall_ms = options_.io_timeout_ms};
}

// ---- sending ----

void Connection::send(uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
                      std::span<const std::span<const float>> tensors) {
  if (type < ff::kFirstUserType) {
    throw std::invalid_argument(
        fmt::format("Connection::send: frame type {} is reserved for the handshake", type));
  }
  check_state(State::kOpen, "send");
  count_sent(meta, tensors);
  guarded([&] {
    if (link_) return link_->send(*this, type, request_id, meta, tensors);
    writer_.write(type, request_id, meta, tensors, io_deadline());
  });
}

void Connection::post(uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
                      std::span<const std::span<const float>> tensors) {
  if (!link_) return send(type, request_id, meta, tensors);
  if (type < ff::kFirstUserType) {
    throw std::invalid_argument(
        fmt::format("Connection::post: frame type {} is reserved for the handshake", type));
  }
  check_state(State::kOpen, "post");
  count_sent(meta, tensors);
  guarded([&] { link_->post(*this, type, request_id, meta, tensors); });
}

void Connection::offer_landing(std::span<float> into) {
  if (!link_) return;
  check_state(State::kOpen, "offer_landing");
  guarded([&] { link_->offer_landing(*this, into); });
}

void Connection::settle() {
  if (!link_) return;
  check_state(State::kOpen, "settle");
  guarded([&] { link_->settle(*this); });
}

std::string Connection::describe_link() const {
  if (link_) return "shm";
  if (why_by_value_.empty())
    return fmt::format("tcp (congestion control {})", congestion_control());
  return fmt::format("tcp ({}; congestion control {})", why_by_value_, congestion_control());
}

std::string Connection::congestion_control() const {
  return tcp_congestion_of(stream_->native_handle());
}

std::string Connection::local_host() const { return local_address_of(stream_->native_handle()); }

bool Connection::input_waiting() {
  if (link_ && link_->input_waiting()) return true;
  return wait_for(stream_->waitable(true, false), /*timeout_ms=*/0);
}

void Connection::start_send(uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
                            std::span<const std::span<const float>> tensors) {
  if (type < ff::kFirstUserType) {
    throw std::invalid_argument(
        fmt::format("Connection::start_send: frame type {} is reserved for the handshake", type));
  }
  check_state(State::kOpen, "start_send");
  if (writer_.busy()) throw std::logic_error("Connection::start_send while a frame is being sent");
  count_sent(meta, tensors);
  guarded([&] {
    if (link_) return link_->start_send(*this, type, request_id, meta, tensors);
    writer_.start(type, request_id, meta, tensors);
  });
}

bool Connection::continue_send() {
  check_state(State::kOpen, "continue_send");
  if (link_) return guarded([&] { return link_->continue_send(*this); });
  if (!writer_.busy()) return true;
  return guarded([&] { return pump_send(); });
}

// ---- receiving ----

Connection::Incoming Connection::receive() {
  check_state(State::kOpen, "receive");
  if (frame_unconsumed_ && tensor_bytes_ > 0) {
    throw std::logic_error(fmt::format(
        "Connection::receive from {}: the previous frame's tensors were neither received nor "
        "discarded",
        peer()));
  }
  return guarded([&] {
    for (;;) {
      if (link_) return link_->receive(*this);
      const Incoming in = receive_frame(IoDeadline{.stall_ms = options_.idle_timeout_ms},
                                        io_deadline(), options_.max_payload_bytes,
                                        /*handshake=*/false);
      if (take_link_frames(in)) return in;
    }
  });
}

Connection::Incoming Connection::receive_frame(const IoDeadline& first_byte, const IoDeadline& rest,
                                               uint64_t max_payload_bytes, bool handshake) {
  try {
    return received(reader_.read(first_byte, rest, max_payload_bytes, handshake));
  } catch (const PeerClosed&) {
    fail(std::current_exception(), /*by_peer=*/true);  // between frames: a normal end
  }
}

std::optional<Connection::Incoming> Connection::try_receive() {
  check_state(State::kOpen, "try_receive");
  if (frame_unconsumed_ && tensor_bytes_ > 0) {
    throw std::logic_error(fmt::format(
        "Connection::try_receive from {}: the previous frame's tensors were neither received nor "
        "discarded",
        peer()));
  }
  return guarded([&]() -> std::optional<Incoming> {
    for (;;) {
      if (link_) return link_->try_receive(*this);
      const std::optional<Incoming> in =
          try_receive_frame(options_.max_payload_bytes, /*handshake=*/false);
      if (!in || take_link_frames(*in)) return in;
    }
  });
}

std::optional<Connection::Incoming> Connection::try_receive_frame(uint64_t max_payload_bytes,
                                                                  bool handshake) {
  try {
    const std::optional<Incoming> in = reader_.try_read(max_payload_bytes, handshake);
    if (!in) return std::nullopt;
    return received(*in);
  } catch (const PeerClosed&) {
    fail(std::current_exception(), /*by_peer=*/true);  // between frames: a normal end
  }
}

Connection::Incoming Connection::received(const Incoming& in) {
  if (traffic_ != nullptr) {
    traffic_->received.fetch_add(ff::kHeaderBytes + in.meta.size() + in.tensor_bytes,
                                 std::memory_order_relaxed);
  }
  receive_type_ = in.type;
  receive_request_id_ = in.request_id;
  tensor_bytes_ = in.tensor_bytes;
  frame_unconsumed_ = true;
  return in;
}

void Connection::check_tensors_allowed() const {
  dtrain::check_tensors_allowed(options_.type_carries_tensors, peer(),
                                {receive_type_, receive_request_id_, {}, tensor_bytes_});
}

void Connection::check_tensor_sizes(uint64_t expected) const {
  if (expected == tensor_bytes_) return;
  throw FrameError(fmt::format(
      "frame of type {} (request {}) from {} carries {} tensor bytes, but the receiver expected {}",
      receive_type_, receive_request_id_, peer(), tensor_bytes_, expected));
}

bool Connection::try_receive_tensors(std::span<float> into) {
  check_state(State::kOpen, "try_receive_tensors");
  if (!frame_unconsumed_) {
    throw std::logic_error(
        "Connection::try_receive_tensors without a frame whose tensors are unread");
  }
  return guarded([&] {
    check_tensor_sizes(into.size_bytes());
    if (link_) {
      frame_unconsumed_ = false;
      link_->receive_tensors(*this, std::span(&into, 1));
      return true;
    }
    if (!reader_.try_read_tensors(into)) return false;
    frame_unconsumed_ = false;
    return true;
  });
}

void Connection::receive_tensors(std::span<const std::span<float>> into) {
  check_state(State::kOpen, "receive_tensors");
  if (!frame_unconsumed_) {
    throw std::logic_error("Connection::receive_tensors without a frame whose tensors are unread");
  }
  guarded([&] {
    uint64_t expected = 0;
    for (auto tensor : into) expected += tensor.size_bytes();
    check_tensor_sizes(expected);
    frame_unconsumed_ = false;
    if (link_) return link_->receive_tensors(*this, into);
    reader_.read_tensors(into, io_deadline());
  });
}

void Connection::discard_tensors() {
  check_state(State::kOpen, "discard_tensors");
  if (!frame_unconsumed_) {
    throw std::logic_error("Connection::discard_tensors without a frame whose tensors are unread");
  }
  guarded([&] {
    frame_unconsumed_ = false;
    if (link_) return link_->discard_tensors(*this);
    reader_.discard_tensors(io_deadline());
  });
}

}  // namespace dtrain
