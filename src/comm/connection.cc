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

namespace dtrain {

namespace ff = frame_format;

namespace {

// Tensor bytes are received and checked (CRC or tag) in chunks of this size, so the check reads
// each chunk while it is still in cache.
constexpr size_t kReceiveChunkBytes = size_t{1} << 20;

FrameError bad_frame_from(const std::string& peer, const FrameError& error) {
  return FrameError(fmt::format("bad frame from {}: {}", peer, error.what()));
}

}  // namespace

Connection::Connection(std::unique_ptr<TcpStream> stream, ConnectionOptions options)
    : stream_(std::move(stream)),
      options_(std::move(options)),
      writer_(*stream_, options_.max_meta_bytes, options_.max_payload_bytes) {
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
  {
    std::lock_guard lock(mutex_);
    if (state_ != State::kClosed) {
      state_ = State::kClosed;
      error_ = error;
      closed_by_peer_ = by_peer;
    }
    first = error_;
  }
  // Wakes a thread blocked in the other direction; it finds the connection closed and rethrows
  // the first error rather than its own consequence of the shutdown.
  stream_->shutdown();
  std::rethrow_exception(first);
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

bool Connection::input_waiting() {
  if (link_ && link_->input_waiting()) return true;
  return TcpStream::wait_either(stream_.get(), nullptr, /*timeout_ms=*/0);
}

void Connection::start_send(uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
                            std::span<const std::span<const float>> tensors) {
  if (type < ff::kFirstUserType) {
    throw std::invalid_argument(
        fmt::format("Connection::start_send: frame type {} is reserved for the handshake", type));
  }
  check_state(State::kOpen, "start_send");
  if (writer_.busy()) throw std::logic_error("Connection::start_send while a frame is being sent");
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
  // A quiet peer may be idle, so the first byte waits by `first_byte`; once a frame has begun,
  // the rest must keep coming.
  std::array<std::byte, ff::kHeaderBytes> header_bytes;
  const size_t got = stream_->read_some(header_bytes, first_byte);
  if (got == 0) {
    fail(std::make_exception_ptr(TransportError(fmt::format("{} closed the connection", peer()))),
         /*by_peer=*/true);
  }
  stream_->read_exact(std::span(header_bytes).subspan(got), rest);
  accept_header(header_bytes, max_payload_bytes, handshake);  // before reading on: it may be junk
  std::array<std::byte, ff::kMetaLenBytes> meta_len;
  stream_->read_exact(meta_len, rest);
  const PayloadLayout layout = accept_meta_len(meta_len);
  // The meta and, where frames are tagged, the opening's tag after it, in one read. (The vector
  // keeps its capacity: no allocation once warmed up.)
  const size_t tag_bytes = check_.tagged() ? kFrameTagBytes : 0;
  meta_.resize(layout.meta_len + tag_bytes);
  stream_->read_exact(meta_, rest);
  check_.open(header_bytes, meta_len, std::span(meta_).first(layout.meta_len), expected_crc_,
              tensor_bytes_ > 0);
  if (check_.tagged()) {
    const auto tag = std::span(meta_).subspan(layout.meta_len);
    std::ranges::copy(tag, check_.missing_tag().begin());
    check_.tag_arrived(tag.size());
    check_.check_opening(peer(), receive_type_);
  }
  meta_.resize(layout.meta_len);
  if (!handshake) check_tensors_allowed();
  frame_unconsumed_ = true;
  if (tensor_bytes_ == 0) finish_frame(rest);  // the whole frame is in
  return incoming();
}

void Connection::accept_header(std::span<const std::byte, ff::kHeaderBytes> header_bytes,
                               uint64_t max_payload_bytes, bool handshake) {
  FrameHeader header;
  try {
    header = decode_header(header_bytes, max_payload_bytes);
  } catch (const FrameError& error) {
    throw bad_frame_from(peer(), error);
  }
  // After the handshake, the link step's reserved types too (take_link_frames judges them).
  const bool allowed =
      handshake ? header.type < ff::kTypeLinkOffer : header.type >= ff::kTypeLinkOffer;
  if (!allowed) {
    throw FrameError(
        fmt::format("bad frame from {}: type {} {}", peer(), header.type,
                    handshake ? "before the handshake finished" : "is reserved for the handshake"));
  }
  expected_crc_ = header.crc32c;
  receive_type_ = header.type;
  receive_request_id_ = header.request_id;
  receive_payload_len_ = header.payload_len;
}

PayloadLayout Connection::accept_meta_len(std::span<const std::byte, ff::kMetaLenBytes> meta_len) {
  PayloadLayout layout;
  try {
    layout = payload_layout(receive_payload_len_, ff::load_le<uint32_t>(meta_len),
                            options_.max_meta_bytes);
  } catch (const FrameError& error) {
    throw bad_frame_from(peer(), error);
  }
  tensor_bytes_ = layout.tensor_bytes;
  return layout;
}

void Connection::check_tensors_allowed() const {
  if (tensor_bytes_ == 0 || options_.type_carries_tensors == nullptr ||
      options_.type_carries_tensors(receive_type_)) {
    return;
  }
  throw FrameError(fmt::format(
      "bad frame from {}: type {} (request {}) carries no tensors, but this one declares {} "
      "tensor bytes",
      peer(), receive_type_, receive_request_id_, tensor_bytes_));
}

Connection::Incoming Connection::incoming() const {
  return Incoming{receive_type_, receive_request_id_, meta_, tensor_bytes_};
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
  const auto header_bytes = std::span(prefix_).first<ff::kHeaderBytes>();
  const auto meta_len = std::span(prefix_).last<ff::kMetaLenBytes>();
  if (!prefix_done_) {
    // The header and the meta length in one read: every payload opens with the meta length,
    // so this never reads past the frame.
    size_t n = 0;
    try {
      n = stream_->read_available(std::span(prefix_).subspan(prefix_have_));
    } catch (const PeerClosed&) {
      if (prefix_have_ == 0) fail(std::current_exception(), /*by_peer=*/true);  // between frames
      throw;
    }
    prefix_have_ += n;
    bytes_moved_ += n;
    // The header is checked as soon as it is in: a stray client's junk may be all it sends.
    if (!header_accepted_ && prefix_have_ >= ff::kHeaderBytes) {
      accept_header(header_bytes, max_payload_bytes, handshake);
      header_accepted_ = true;
    }
    if (prefix_have_ < prefix_.size()) return std::nullopt;
    meta_.resize(accept_meta_len(meta_len).meta_len);
    prefix_done_ = true;
    meta_have_ = 0;
  }
  if (meta_have_ < meta_.size()) {
    const size_t n = stream_->read_available(std::span(meta_).subspan(meta_have_));
    meta_have_ += n;
    bytes_moved_ += n;
    if (meta_have_ < meta_.size()) return std::nullopt;
  }
  if (!opening_absorbed_) {
    check_.open(header_bytes, meta_len, meta_, expected_crc_, tensor_bytes_ > 0);
    opening_absorbed_ = true;
  }
  if (check_.tagged() && !opening_checked_) {
    const size_t n = stream_->read_available(check_.missing_tag());
    check_.tag_arrived(n);
    bytes_moved_ += n;
    if (!check_.missing_tag().empty()) return std::nullopt;
    check_.check_opening(peer(), receive_type_);
    opening_checked_ = true;
  }
  if (!handshake) check_tensors_allowed();
  if (tensor_bytes_ == 0 && !try_finish_frame()) return std::nullopt;  // the CRC is not checked
  prefix_have_ = 0;
  header_accepted_ = false;
  prefix_done_ = false;
  opening_absorbed_ = false;
  opening_checked_ = false;
  tensors_have_ = 0;
  frame_unconsumed_ = true;
  return incoming();
}

bool Connection::try_receive_tensors(std::span<float> into) {
  check_state(State::kOpen, "try_receive_tensors");
  if (!frame_unconsumed_) {
    throw std::logic_error(
        "Connection::try_receive_tensors without a frame whose tensors are unread");
  }
  return guarded([&] {
    if (into.size_bytes() != tensor_bytes_) {
      throw FrameError(fmt::format(
          "frame of type {} (request {}) from {} carries {} tensor bytes, but the receiver "
          "expected {}",
          receive_type_, receive_request_id_, peer(), tensor_bytes_, into.size_bytes()));
    }
    if (link_) {
      frame_unconsumed_ = false;
      link_->receive_tensors(*this, std::span(&into, 1));
      return true;
    }
    const std::span<std::byte> bytes = std::as_writable_bytes(into);
    while (tensors_have_ < tensor_bytes_) {
      // Capped, so the CRC reads each piece while it is still in cache.
      const size_t want = std::min<uint64_t>(tensor_bytes_ - tensors_have_, kReceiveChunkBytes);
      const auto piece = bytes.subspan(tensors_have_, want);
      const size_t n = stream_->read_available(piece);
      check_.absorb(piece.first(n));
      tensors_have_ += n;
      bytes_moved_ += n;
      if (n < want) return false;  // the socket is drained; another read would find nothing
    }
    if (!try_finish_frame()) return false;
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
    if (expected != tensor_bytes_) {
      throw FrameError(fmt::format(
          "frame of type {} (request {}) from {} carries {} tensor bytes, but the receiver "
          "expected {}",
          receive_type_, receive_request_id_, peer(), tensor_bytes_, expected));
    }
    frame_unconsumed_ = false;
    if (link_) return link_->receive_tensors(*this, into);
    for (auto tensor : into) read_tensor_bytes(std::as_writable_bytes(tensor));
    finish_frame(io_deadline());
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
    if (tensor_bytes_ > 0 && discard_.empty()) discard_.resize(kReceiveChunkBytes);
    for (uint64_t left = tensor_bytes_; left > 0;) {
      const size_t n = std::min<uint64_t>(left, discard_.size());
      read_tensor_bytes(std::span(discard_).first(n));
      left -= n;
    }
    finish_frame(io_deadline());
  });
}

void Connection::read_tensor_bytes(std::span<std::byte> into) {
  while (!into.empty()) {
    const auto chunk = into.first(std::min(into.size(), kReceiveChunkBytes));
    stream_->read_exact(chunk, io_deadline());
    check_.absorb(chunk);
    into = into.subspan(chunk.size());
  }
}

void Connection::finish_frame(const IoDeadline& deadline) {
  if (check_.checked()) return;
  if (check_.tagged()) {
    const auto tag = check_.missing_tag();
    stream_->read_exact(tag, deadline);
    check_.tag_arrived(tag.size());
  }
  check_.check(peer(), receive_type_, receive_request_id_);
}

bool Connection::try_finish_frame() {
  if (check_.checked()) return true;
  if (check_.tagged()) {
    const size_t n = stream_->read_available(check_.missing_tag());
    check_.tag_arrived(n);
    bytes_moved_ += n;
    if (!check_.missing_tag().empty()) return false;
  }
  check_.check(peer(), receive_type_, receive_request_id_);
  return true;
}

}  // namespace dtrain
