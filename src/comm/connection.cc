// Frames over a TcpStream: the streaming send and receive paths, the handshake sequence, and the
// rule that a failed connection stays failed.
#include "comm/connection.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "base/crc32c.h"
#include "base/error.h"
#include "base/peer_text.h"
#include "comm/auth.h"
#include "comm/frame.h"

namespace dtrain {

namespace ff = frame_format;

namespace {

// Tensor bytes are received and checked (CRC or tag) in chunks of this size, so the check reads
// each chunk while it is still in cache.
constexpr size_t kReceiveChunkBytes = size_t{1} << 20;
// A frame whose tag is computed as it is sent goes out in writes of at most this size: a ps shard
// (1 MiB by default) in one write, as with a CRC. Smaller writes let the peer check one while the
// next is tagged, but each costs a wake-up of the peer: 256 KiB made ps training 20% slower.
constexpr size_t kSendBatchBytes = size_t{1} << 20;
// A tagged frame's first pieces: header, meta length, meta and the opening's tag.
constexpr size_t kTaggedOpeningPieces = 4;

FrameError bad_frame_from(const std::string& peer, const FrameError& error) {
  return FrameError(fmt::format("bad frame from {}: {}", peer, error.what()));
}

}  // namespace

Connection::Connection(std::unique_ptr<TcpStream> stream, ConnectionOptions options)
    : stream_(std::move(stream)), options_(std::move(options)) {
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

template <typename Body>
auto Connection::guarded(Body&& body) {
  try {
    return body();
  } catch (const TransportError&) {
    fail(std::current_exception());
  }
}

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
  guarded([&] { send_frame(type, request_id, meta, tensors, io_deadline()); });
}

void Connection::send_frame(uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
                            std::span<const std::span<const float>> tensors,
                            const IoDeadline& deadline) {
  prepare_frame(type, request_id, meta, tensors, /*tag_tensors_now=*/false);
  if (!send_mac_ || send_pieces_.size() == kTaggedOpeningPieces) {
    stream_->write_all(send_pieces_, deadline);
    return;
  }
  // The tensors are tagged as they go out, a batch at a time: for a frame of several batches, the
  // peer reads and checks one while we tag the next.
  send_mac_->begin(send_frame_number_, FramePart::kTensors);
  std::vector<std::span<const std::byte>>& batch = send_batch_;
  batch.clear();
  size_t batch_bytes = 0;
  for (size_t i = 0; i < send_pieces_.size(); ++i) {
    std::span<const std::byte> piece = send_pieces_[i];
    while (!piece.empty()) {
      const auto part = piece.first(std::min(piece.size(), kSendBatchBytes - batch_bytes));
      if (i >= kTaggedOpeningPieces) send_mac_->update(part);
      batch.push_back(part);
      batch_bytes += part.size();
      piece = piece.subspan(part.size());
      if (batch_bytes == kSendBatchBytes) {
        stream_->write_all(batch, deadline);
        batch.clear();
        batch_bytes = 0;
      }
    }
  }
  send_tensor_tag_ = send_mac_->tag();
  batch.push_back(send_tensor_tag_);
  stream_->write_all(batch, deadline);
}

void Connection::prepare_frame(uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
                               std::span<const std::span<const float>> tensors,
                               bool tag_tensors_now) {
  uint64_t tensor_bytes = 0;
  for (auto tensor : tensors) tensor_bytes += tensor.size_bytes();
  const uint64_t payload_len = ff::kMetaLenBytes + meta.size() + tensor_bytes;
  // The peer would refuse these; failing here names the real culprit, this sender.
  if (meta.size() > options_.max_meta_bytes || meta.size() > UINT32_MAX) {
    throw FrameError(fmt::format("a {}-byte meta block for {} is over the {}-byte limit",
                                 meta.size(), peer(), options_.max_meta_bytes));
  }
  if (payload_len > options_.max_payload_bytes) {
    throw FrameError(fmt::format("a frame of {} payload bytes for {} is over the {}-byte limit",
                                 payload_len, peer(), options_.max_payload_bytes));
  }
  encode_header({.type = type, .request_id = request_id, .payload_len = payload_len}, send_header_);
  ff::store_le(send_meta_len_, static_cast<uint32_t>(meta.size()));

  send_pieces_.clear();
  send_pieces_.push_back(send_header_);
  send_pieces_.push_back(send_meta_len_);
  send_pieces_.push_back(meta);

  if (send_mac_) {
    // The opening's tag follows the meta and covers the header (crc32c 0), meta length and meta.
    send_frame_number_ = frames_sent_++;
    send_mac_->begin(send_frame_number_, FramePart::kOpening);
    for (auto piece : send_pieces_) send_mac_->update(piece);
    send_opening_tag_ = send_mac_->tag();
    send_pieces_.push_back(send_opening_tag_);
    if (tensor_bytes == 0) return;
    for (auto tensor : tensors) send_pieces_.push_back(std::as_bytes(tensor));
    if (!tag_tensors_now) return;
    send_mac_->begin(send_frame_number_, FramePart::kTensors);
    for (auto tensor : tensors) send_mac_->update(std::as_bytes(tensor));
    send_tensor_tag_ = send_mac_->tag();
    send_pieces_.push_back(send_tensor_tag_);
    return;
  }
  for (auto tensor : tensors) send_pieces_.push_back(std::as_bytes(tensor));
  // The CRC leads the frame but covers all of it, so it is chained over the pieces before any
  // byte is written; the pieces then go out in one gathered write.
  uint32_t crc = header_crc(send_header_);
  for (auto piece : std::span(send_pieces_).subspan(1)) crc = crc32c(piece, crc);
  ff::store_le(std::span(send_header_).subspan(ff::kCrcOffset), crc);
}

void Connection::start_send(uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
                            std::span<const std::span<const float>> tensors) {
  if (type < ff::kFirstUserType) {
    throw std::invalid_argument(
        fmt::format("Connection::start_send: frame type {} is reserved for the handshake", type));
  }
  check_state(State::kOpen, "start_send");
  if (sending_) throw std::logic_error("Connection::start_send while a frame is being sent");
  guarded([&] { prepare_frame(type, request_id, meta, tensors, /*tag_tensors_now=*/true); });
  send_piece_ = 0;
  send_offset_ = 0;
  sending_ = true;
}

bool Connection::continue_send() {
  check_state(State::kOpen, "continue_send");
  if (!sending_) return true;
  return guarded([&] { return pump_send(); });
}

bool Connection::pump_send() {
  if (!sending_) return true;
  size_t written =
      stream_->write_available(std::span(send_pieces_).subspan(send_piece_), send_offset_);
  bytes_moved_ += written;
  // Advance over what was written, which may end inside any piece; empty pieces are passed.
  while (send_piece_ < send_pieces_.size()) {
    const size_t left = send_pieces_[send_piece_].size() - send_offset_;
    if (written < left) {
      send_offset_ += written;
      break;
    }
    written -= left;
    ++send_piece_;
    send_offset_ = 0;
  }
  sending_ = send_piece_ < send_pieces_.size();
  return !sending_;
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
    return receive_frame(IoDeadline{.stall_ms = options_.idle_timeout_ms}, io_deadline(),
                         options_.max_payload_bytes, /*handshake=*/false);
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
  const size_t tag_bytes = receive_mac_ ? receive_tag_.size() : 0;
  meta_.resize(layout.meta_len + tag_bytes);
  stream_->read_exact(meta_, rest);
  std::copy_n(meta_.end() - static_cast<ptrdiff_t>(tag_bytes), tag_bytes, receive_tag_.begin());
  meta_.resize(layout.meta_len);
  absorb_opening(header_bytes, meta_len);
  if (receive_mac_) check_opening();
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
  if (handshake != (header.type < ff::kFirstUserType)) {
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

void Connection::absorb_opening(std::span<const std::byte, ff::kHeaderBytes> header_bytes,
                                std::span<const std::byte, ff::kMetaLenBytes> meta_len) {
  frame_checked_ = false;
  tag_have_ = 0;
  if (receive_mac_) {
    receive_frame_number_ = frames_received_++;
    receive_mac_->begin(receive_frame_number_, FramePart::kOpening);
    receive_mac_->update(header_bytes);
  } else {
    receive_crc_ = header_crc(header_bytes);
  }
  absorb(meta_len);
  absorb(meta_);
}

void Connection::check_opening() {
  if (!receive_mac_->verify(receive_tag_)) {
    // Nothing in the opening is trusted, so its type and request are not named as facts.
    throw FrameError(fmt::format(
        "frame {} from {} failed authentication (its header and meta, claiming type {}): it was "
        "altered, forged, replayed, reordered or cut short on the way, or the sender does not "
        "hold the cluster secret",
        receive_frame_number_, peer(), receive_type_));
  }
  tag_have_ = 0;
  if (tensor_bytes_ == 0) {
    frame_checked_ = true;
  } else {
    receive_mac_->begin(receive_frame_number_, FramePart::kTensors);
  }
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

void Connection::absorb(std::span<const std::byte> bytes) {
  if (receive_mac_) {
    receive_mac_->update(bytes);
  } else {
    receive_crc_ = crc32c(bytes, receive_crc_);
  }
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
  return guarded(
      [&] { return try_receive_frame(options_.max_payload_bytes, /*handshake=*/false); });
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
    absorb_opening(header_bytes, meta_len);
    opening_absorbed_ = true;
  }
  if (receive_mac_ && !opening_checked_) {
    const size_t n = stream_->read_available(std::span(receive_tag_).subspan(tag_have_));
    tag_have_ += n;
    bytes_moved_ += n;
    if (tag_have_ < receive_tag_.size()) return std::nullopt;
    check_opening();
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
    const std::span<std::byte> bytes = std::as_writable_bytes(into);
    while (tensors_have_ < tensor_bytes_) {
      // Capped, so the CRC reads each piece while it is still in cache.
      const size_t want = std::min<uint64_t>(tensor_bytes_ - tensors_have_, kReceiveChunkBytes);
      const auto piece = bytes.subspan(tensors_have_, want);
      const size_t n = stream_->read_available(piece);
      absorb(piece.first(n));
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
    absorb(chunk);
    into = into.subspan(chunk.size());
  }
}

void Connection::finish_frame(const IoDeadline& deadline) {
  if (frame_checked_) return;
  if (receive_mac_) {
    stream_->read_exact(std::span(receive_tag_).subspan(tag_have_), deadline);
    tag_have_ = receive_tag_.size();
  }
  check_frame();
}

bool Connection::try_finish_frame() {
  if (frame_checked_) return true;
  if (receive_mac_) {
    const size_t n = stream_->read_available(std::span(receive_tag_).subspan(tag_have_));
    tag_have_ += n;
    bytes_moved_ += n;
    if (tag_have_ < receive_tag_.size()) return false;
  }
  check_frame();
  return true;
}

void Connection::check_frame() {
  frame_checked_ = true;
  if (receive_mac_) {
    if (!receive_mac_->verify(receive_tag_)) {
      throw FrameError(fmt::format(
          "frame {} from {} (type {}, request {}) failed authentication in its tensors: they were "
          "altered or cut short on the way, or the sender does not hold the cluster secret",
          receive_frame_number_, peer(), receive_type_, receive_request_id_));
    }
    return;
  }
  if (receive_crc_ != expected_crc_) {
    throw FrameError(fmt::format(
        "bad CRC32C from {} (frame type {}, request {}): computed 0x{:08X}, header says 0x{:08X}",
        peer(), receive_type_, receive_request_id_, receive_crc_, expected_crc_));
  }
}

// ---- handshake (protocol in comm/auth.h) ----

std::span<const std::byte> Connection::expect_handshake_frame(uint16_t type, size_t min_meta,
                                                              size_t max_meta,
                                                              const IoDeadline& deadline) {
  // Until the peer has proved the secret, it may make us read only a tiny frame.
  const Incoming in =
      receive_frame(deadline, deadline, ff::kMaxHandshakePayloadBytes, /*handshake=*/true);
  return check_handshake_frame(in, type, min_meta, max_meta);
}

std::span<const std::byte> Connection::check_handshake_frame(const Incoming& in, uint16_t type,
                                                             size_t min_meta,
                                                             size_t max_meta) const {
  const bool we_are_the_client = type == ff::kTypeChallenge || type == ff::kTypeAuthOk;
  if (in.type == ff::kTypeAuthFailed && !we_are_the_client) {
    throw AuthError(fmt::format(
        "{} failed authentication (wrong cluster secret): it rejected our proof", peer()));
  }
  if (in.type == ff::kTypeAuthFailed) {
    // Nothing binds this frame to the peer's secret, so a relay could have sent it: a failure
    // the peer has not proved is transient (connect() tries again), not final as our own check
    // of its proof is. A real peer says it only to a client whose secret differs, and that client
    // has found out itself before.
    throw TransportError(fmt::format(
        "{} said that authentication failed, which it did not prove (another cluster secret, or a "
        "relay on the way)",
        peer()));
  }
  if (in.type == ff::kTypeRefused && type == ff::kTypeAuthOk) {
    throw AuthError(fmt::format("{} refused this connection: {}", peer(), peer_text(in.meta)));
  }
  if (in.type != type || in.meta.size() < min_meta || in.meta.size() > max_meta ||
      in.tensor_bytes != 0) {
    throw AuthError(fmt::format(
        "{} broke the handshake: expected frame type {} with {}..{} meta bytes, got type {} with "
        "{} meta and {} tensor bytes",
        peer(), type, min_meta, max_meta, in.type, in.meta.size(), in.tensor_bytes));
  }
  return in.meta;
}

void Connection::send_auth_failed_quietly(const IoDeadline& deadline) {
  // A courtesy so that the other side can log the real reason; if it cannot be delivered, the
  // AuthError this precedes is still the error to report.
  try {
    send_frame(ff::kTypeAuthFailed, 0, {}, {}, deadline);
  } catch (const TransportError&) {
  }
}

HandshakeParams Connection::own_params() const {
  return {.authenticate_frames = options_.authenticate_frames,
          .process_key = process_key().public_key(),
          .identity = options_.identity};
}

std::string Connection::mismatched_frames_error(const HandshakeParams& peer_said) const {
  return fmt::format(
      "{} {} its frames and this task {}: start every task of the cluster with "
      "--unauthenticated_frames, or none",
      peer(), peer_said.authenticate_frames ? "authenticates" : "does not authenticate",
      options_.authenticate_frames ? "does" : "does not");
}

namespace {

std::span<const std::byte> bytes_of(const std::vector<std::byte>& v) { return v; }

}  // namespace

void Connection::handshake_as_client(std::string_view secret) {
  if (secret.empty()) throw std::invalid_argument("Connection::handshake_as_client: empty secret");
  check_state(State::kHandshaking, "handshake_as_client");
  const IoDeadline deadline{
      .until = SteadyClock::now() + std::chrono::milliseconds(options_.handshake_timeout_ms),
      .stall_ms = options_.io_timeout_ms};
  HandshakeParams server;
  FrameKeys keys;
  guarded([&] {
    const Nonce client_nonce = random_nonce();
    const std::vector<std::byte> client_params = encode_params(own_params());
    std::vector<std::byte> hello(client_nonce.begin(), client_nonce.end());
    hello.insert(hello.end(), client_params.begin(), client_params.end());
    send_frame(ff::kTypeHello, 0, hello, {}, deadline);

    const auto challenge =
        expect_handshake_frame(ff::kTypeChallenge, kNonceBytes + kProofBytes,
                               kNonceBytes + kProofBytes + kMaxParamsBytes, deadline);
    Nonce server_nonce;
    Proof their_proof;
    std::memcpy(server_nonce.data(), challenge.data(), kNonceBytes);
    std::memcpy(their_proof.data(), challenge.data() + kNonceBytes, kProofBytes);
    const auto server_params = challenge.subspan(kNonceBytes + kProofBytes);
    // The server proves itself first: we prove nothing to a peer that does not hold the secret.
    if (!proofs_equal(their_proof, server_proof(secret, client_nonce, server_nonce,
                                                bytes_of(client_params), server_params))) {
      send_auth_failed_quietly(deadline);
      throw AuthError(fmt::format(
          "{} failed authentication (wrong cluster secret): its proof does not match our secret",
          peer()));
    }
    server = decode_params(server_params);
    if (server.authenticate_frames != options_.authenticate_frames) {
      send_auth_failed_quietly(deadline);
      throw AuthError(mismatched_frames_error(server));
    }
    // The proof of the secret, then of which process this is.
    const Proof proof =
        client_proof(secret, server_nonce, client_nonce, bytes_of(client_params), server_params);
    const ProcessSignature signature = process_key().sign(
        process_transcript(server_nonce, client_nonce, bytes_of(client_params), server_params));
    std::vector<std::byte> proof_meta(proof.begin(), proof.end());
    proof_meta.insert(proof_meta.end(), signature.begin(), signature.end());
    send_frame(ff::kTypeProof, 0, proof_meta, {}, deadline);
    expect_handshake_frame(ff::kTypeAuthOk, 0, 0, deadline);
    if (options_.authenticate_frames) {
      keys = frame_keys(secret, client_nonce, server_nonce, bytes_of(client_params), server_params);
    }
  });
  open_after_handshake(server, &keys.client_to_server, &keys.server_to_client);
}

void Connection::handshake_as_server(std::string_view secret, const Admission& admit) {
  const auto until = SteadyClock::now() + std::chrono::milliseconds(options_.handshake_timeout_ms);
  while (!continue_handshake_as_server(secret, admit)) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - SteadyClock::now());
    if (left.count() <= 0) {
      fail(std::make_exception_ptr(
          TransportError(sending_ ? fmt::format("timed out sending to {}", peer())
                                  : fmt::format("timed out waiting for data from {}", peer()))));
    }
    const TcpStream::Wait wait{stream_.get(), !sending_, sending_};
    TcpStream::wait_any(std::span(&wait, 1), static_cast<int>(left.count()));
  }
}

// ---- the server's side, a step at a time ----

struct Connection::ServerHandshake {
  enum class Stage { kHello, kChallenge, kProof, kAnswer };
  Stage stage = Stage::kHello;
  Nonce client_nonce{};
  Nonce server_nonce{};
  std::vector<std::byte> client_params;
  std::vector<std::byte> server_params;
  HandshakeParams client;
  std::vector<std::byte> outgoing;   // the meta of the frame being sent, which refers to it
  std::optional<AuthError> failure;  // told to the client; thrown once that is out
  FrameKeys keys;
};

bool Connection::continue_handshake_as_server(std::string_view secret, const Admission& admit) {
  if (secret.empty()) throw std::invalid_argument("Connection::handshake_as_server: empty secret");
  check_state(State::kHandshaking, "handshake_as_server");
  if (!server_handshake_) server_handshake_ = std::make_unique<ServerHandshake>();
  ServerHandshake& h = *server_handshake_;
  if (!guarded([&] { return advance_server_handshake(h, secret, admit); })) return false;
  const HandshakeParams client = std::move(h.client);
  const FrameKeys keys = h.keys;
  server_handshake_.reset();
  open_after_handshake(client, &keys.server_to_client, &keys.client_to_server);
  return true;
}

bool Connection::advance_server_handshake(ServerHandshake& h, std::string_view secret,
                                          const Admission& admit) {
  using Stage = ServerHandshake::Stage;
  for (;;) {
    switch (h.stage) {
      case Stage::kHello: {
        // Until the peer has proved the secret, it may make us read only a tiny frame.
        const auto in = try_receive_frame(ff::kMaxHandshakePayloadBytes, /*handshake=*/true);
        if (!in) return false;
        const auto hello =
            check_handshake_frame(*in, ff::kTypeHello, kNonceBytes, kNonceBytes + kMaxParamsBytes);
        std::memcpy(h.client_nonce.data(), hello.data(), kNonceBytes);
        h.client_params.assign(hello.begin() + kNonceBytes, hello.end());
        h.client = decode_params(h.client_params);
        h.server_nonce = random_nonce();
        h.server_params = encode_params(own_params());
        const Proof ours = server_proof(secret, h.client_nonce, h.server_nonce,
                                        bytes_of(h.client_params), bytes_of(h.server_params));
        h.outgoing.assign(h.server_nonce.begin(), h.server_nonce.end());
        h.outgoing.insert(h.outgoing.end(), ours.begin(), ours.end());
        h.outgoing.insert(h.outgoing.end(), h.server_params.begin(), h.server_params.end());
        start_handshake_frame(ff::kTypeChallenge, h.outgoing);
        h.stage = Stage::kChallenge;
        break;
      }
      case Stage::kChallenge:
        if (!pump_send()) return false;
        h.stage = Stage::kProof;
        break;
      case Stage::kProof: {
        const auto in = try_receive_frame(ff::kMaxHandshakePayloadBytes, /*handshake=*/true);
        if (!in) return false;
        // A client whose setting differs says so by refusing to go on (it checks once it knows
        // we hold the secret); the reason is ours to log too.
        const bool mismatched = h.client.authenticate_frames != options_.authenticate_frames;
        std::span<const std::byte> proof;
        try {
          proof = check_handshake_frame(*in, ff::kTypeProof, kProofBytes + kProcessSignatureBytes,
                                        kProofBytes + kProcessSignatureBytes);
        } catch (const AuthError&) {
          if (mismatched) throw AuthError(mismatched_frames_error(h.client));
          throw;
        }
        Proof theirs;
        std::memcpy(theirs.data(), proof.data(), kProofBytes);
        ProcessSignature signature;
        std::memcpy(signature.data(), proof.data() + kProofBytes, kProcessSignatureBytes);
        if (!proofs_equal(theirs,
                          client_proof(secret, h.server_nonce, h.client_nonce,
                                       bytes_of(h.client_params), bytes_of(h.server_params)))) {
          answer(h, ff::kTypeAuthFailed, {},
                 AuthError(fmt::format("{} failed authentication (wrong cluster secret): its "
                                       "proof does not match our secret",
                                       peer())));
        } else if (!verify_process_signature(
                       h.client.process_key,
                       process_transcript(h.server_nonce, h.client_nonce, bytes_of(h.client_params),
                                          bytes_of(h.server_params)),
                       signature)) {
          answer(h, ff::kTypeAuthFailed, {},
                 AuthError(fmt::format("{} holds the cluster secret but did not prove it is the "
                                       "process it says it is (its process key): another process "
                                       "passing for it?",
                                       peer())));
        } else if (mismatched) {
          answer(h, ff::kTypeAuthFailed, {}, AuthError(mismatched_frames_error(h.client)));
        } else if (const std::string reason = admit ? admit(h.client) : ""; !reason.empty()) {
          // Cut to what a handshake frame carries; the whole reason is in our own log.
          const std::string_view told =
              std::string_view(reason).substr(0, ff::kMaxHandshakePayloadBytes - ff::kMetaLenBytes);
          answer(h, ff::kTypeRefused, std::as_bytes(std::span(told)),
                 AuthError(fmt::format("refused {}: {}", peer(), reason)));
        } else {
          if (options_.authenticate_frames) {
            h.keys = frame_keys(secret, h.client_nonce, h.server_nonce, bytes_of(h.client_params),
                                bytes_of(h.server_params));
          }
          answer(h, ff::kTypeAuthOk, {}, std::nullopt);
        }
        break;
      }
      case Stage::kAnswer:
        try {
          if (!pump_send()) return false;
        } catch (const TransportError&) {
          // Telling a failing client why is a courtesy; the failure is the error to report.
          if (h.failure) throw *h.failure;
          throw;
        }
        if (h.failure) throw *h.failure;
        return true;
    }
  }
}

void Connection::answer(ServerHandshake& h, uint16_t type, std::span<const std::byte> meta,
                        std::optional<AuthError> failure) {
  h.outgoing.assign(meta.begin(), meta.end());
  start_handshake_frame(type, h.outgoing);
  h.failure = std::move(failure);
  h.stage = ServerHandshake::Stage::kAnswer;
}

void Connection::start_handshake_frame(uint16_t type, std::span<const std::byte> meta) {
  prepare_frame(type, 0, meta, {}, /*tag_tensors_now=*/true);  // no frame keys yet: a CRC
  send_piece_ = 0;
  send_offset_ = 0;
  sending_ = true;
}

void Connection::open_after_handshake(const HandshakeParams& peer, const FrameKey* send_key,
                                      const FrameKey* receive_key) {
  peer_params_ = peer;
  if (options_.authenticate_frames) {
    send_mac_ = std::make_unique<FrameMac>(*send_key);
    receive_mac_ = std::make_unique<FrameMac>(*receive_key);
  }
  std::lock_guard lock(mutex_);
  // close() from another thread may have won; closed stays closed.
  if (state_ == State::kHandshaking) state_ = State::kOpen;
}

// ---- connect ----

namespace {

std::string peer_address(const std::string& host, uint16_t port) {
  const bool v6_literal = host.find(':') != std::string::npos;
  return v6_literal ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
}

}  // namespace

PeerWaitOptions connect_wait_options(const std::string& host, uint16_t port,
                                     const ConnectionOptions& options) {
  return {.peer = options.task_name.empty() ? "the peer" : options.task_name,
          .address = peer_address(host, port),
          .verb = "reach",
          .timeout = std::chrono::milliseconds(options.connect_timeout_ms),
          .report_interval = std::chrono::milliseconds(options.wait_report_interval_ms),
          .report = options.wait_report,
          .stop = options.stop,
          .abandon = options.abandon_wait};
}

std::unique_ptr<Connection> connect(const std::string& host, uint16_t port, std::string_view secret,
                                    const ConnectionOptions& options) {
  PeerWait wait(connect_wait_options(host, port, options));
  return connect(host, port, secret, options, wait);
}

std::unique_ptr<Connection> connect(const std::string& host, uint16_t port, std::string_view secret,
                                    const ConnectionOptions& options, PeerWait& wait) {
  if (secret.empty()) throw UsageError("cannot connect: the cluster secret is empty");
  for (;;) {
    wait.check_stop();
    // The kernel resends an unanswered SYN ever more slowly (1, 3, 7, 15 s …); a fresh attempt
    // reaches a peer whose link has come back sooner.
    const auto attempt_until =
        options.liveness_timeout_ms > 0
            ? std::min(wait.deadline(),
                       SteadyClock::now() + std::chrono::milliseconds(options.liveness_timeout_ms))
            : wait.deadline();
    std::string error;
    if (auto stream = TcpStream::try_connect(host, port, attempt_until, error)) {
      // A handshake that breaks is retried like a refused connect: a flooded server sheds the
      // oldest handshakes, a restarting one may reset it, and a relay may fake a failure the
      // server never proved. Only a failure we proved ourselves (AuthError) is final.
      try {
        auto connection = std::make_unique<Connection>(std::move(stream), options);
        connection->handshake_as_client(secret);
        return connection;
      } catch (const AuthError&) {
        throw;
      } catch (const TransportError& handshake_error) {
        error = fmt::format("the handshake failed: {}", handshake_error.what());
      }
    }
    wait.failed(std::move(error));
    if (!wait.pause()) wait.give_up();
  }
}

}  // namespace dtrain
