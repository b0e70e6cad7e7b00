// Shared pieces of the transport tests, which run over real loopback sockets: an echo handler, a
// hand-driven "raw" peer that can break the protocol on purpose, and a capture of the log.
#pragma once

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "comm/auth.h"
#include "comm/connect.h"
#include "comm/connection.h"
#include "comm/frame.h"
#include "comm/frame_mac.h"
#include "comm/server.h"
#include "comm/tcp_stream.h"

namespace dtrain::testing {

// Not kSecret: support/ps_cluster.h has one in this namespace, and two inline variables of one
// name are one variable to the linker, whichever definition it keeps.
inline constexpr std::string_view kLoopbackSecret = "correct horse battery staple";
inline constexpr uint16_t kEchoType = 16;

// Bounds every wait in these tests: far above what a loaded machine needs, far below a hang.
inline constexpr std::chrono::milliseconds kPatience{10'000};

// Sends every frame back: the same type, request id and meta, and the tensors as one. Throws
// TransportError once the connection ends.
[[noreturn]] inline void echo(Connection& connection) {
  std::vector<std::byte> meta;
  std::vector<float> tensors;
  for (;;) {
    const Connection::Incoming in = connection.receive();
    meta.assign(in.meta.begin(), in.meta.end());
    tensors.resize(in.tensor_bytes / sizeof(float));
    const std::span<float> into[] = {tensors};
    connection.receive_tensors(into);
    // No tensor for a frame that came without (on a by-reference link, one empty tensor would
    // still be a reference to acknowledge).
    const std::span<const float> out[] = {tensors};
    connection.send(in.type, in.request_id, meta,
                    tensors.empty() ? std::span<const std::span<const float>>() : out);
  }
}

inline ServerOptions loopback_options() {
  ServerOptions options;
  options.bind_host = "127.0.0.1";
  options.secret = std::string(kLoopbackSecret);
  options.connection.io_timeout_ms = 5'000;
  options.connection.handshake_timeout_ms = 5'000;
  return options;
}

// A port with nothing listening on it (one a server just gave up).
inline uint16_t free_port() {
  Server server(loopback_options(), [](Connection&) {});
  return server.port();
}

inline ConnectionOptions client_options() {
  ConnectionOptions options;
  options.task_name = "ps0";
  options.io_timeout_ms = 5'000;
  options.connect_timeout_ms = 5'000;
  return options;
}

inline std::unique_ptr<Connection> connect_to(const Server& server,
                                              std::string_view secret = kLoopbackSecret) {
  return connect("127.0.0.1", server.port(), secret, client_options());
}

// Sends one small frame through an echo server and checks it comes back: the server still
// serves this connection.
inline void expect_echo_works(Connection& connection) {
  const std::vector<float> values = {3.0f, 1.0f, 4.0f};
  const std::span<const float> out[] = {values};
  const std::byte meta[] = {std::byte{42}};
  connection.send(kEchoType, 99, meta, out);
  const auto in = connection.receive();
  EXPECT_EQ(in.request_id, 99u);
  ASSERT_EQ(in.meta.size(), 1u);
  EXPECT_EQ(in.meta[0], std::byte{42});
  std::vector<float> back(3);
  const std::span<float> into[] = {back};
  connection.receive_tensors(into);
  EXPECT_EQ(back, values);
}

// A peer driven by hand, below Connection: it can authenticate (the handshake written out from
// comm/auth.h, independently of Connection's) and then write any bytes at all.
class RawPeer {
 public:
  explicit RawPeer(uint16_t port) {
    std::string error;
    stream_ =
        TcpStream::try_connect("127.0.0.1", port, deadline().until, kTcpCongestionAuto, error);
    if (!stream_) throw TransportError("raw peer could not connect: " + error);
  }

  void write(std::span<const std::byte> bytes) {
    const std::span<const std::byte> pieces[] = {bytes};
    stream_->write_all(pieces, deadline());
  }

  // The client's side of the handshake, by hand. With authenticate_frames, seal() then tags
  // frames as the server expects.
  void authenticate(std::string_view secret, bool authenticate_frames = true) {
    ASSERT_EQ(handshake(secret, authenticate_frames), frame_format::kTypeAuthOk);
  }

  // The same, saying `identity` and `claimed_key` (this peer's own key if null) but signing with
  // this peer's own key: returns the type of the server's answer (AUTH_OK, AUTH_FAILED, REFUSED).
  uint16_t handshake(std::string_view secret, bool authenticate_frames = true,
                     const std::string& identity = "raw peer",
                     const ProcessPublicKey* claimed_key = nullptr) {
    const Nonce client_nonce = random_nonce();
    const auto client_params = encode_params(
        {.authenticate_frames = authenticate_frames,
         .process_key = claimed_key != nullptr ? *claimed_key : process_key_.public_key(),
         .identity = identity});
    std::vector<std::byte> hello(client_nonce.begin(), client_nonce.end());
    hello.insert(hello.end(), client_params.begin(), client_params.end());
    write(encode_frame(frame_format::kTypeHello, 0, hello, {}));
    const auto challenge = read_frame();
    Nonce server_nonce;
    std::memcpy(server_nonce.data(), challenge.data() + meta_offset(), kNonceBytes);
    const std::vector<std::byte> server_params(
        challenge.begin() + meta_offset() + kNonceBytes + kProofBytes, challenge.end());
    const Proof proof =
        client_proof(secret, server_nonce, client_nonce, client_params, server_params);
    const ProcessSignature signature = process_key_.sign(
        process_transcript(server_nonce, client_nonce, client_params, server_params));
    std::vector<std::byte> proof_meta(proof.begin(), proof.end());
    proof_meta.insert(proof_meta.end(), signature.begin(), signature.end());
    write(encode_frame(frame_format::kTypeProof, 0, proof_meta, {}));
    const uint16_t answer = decode_frame(read_frame(), 1024, 1024).header.type;
    if (answer == frame_format::kTypeAuthOk && authenticate_frames) {
      mac_ = std::make_unique<FrameMac>(
          frame_keys(secret, client_nonce, server_nonce, client_params, server_params)
              .client_to_server);
    }
    return answer;
  }

  // A frame from encode_frame as an authenticated connection sends it: crc32c 0, the tag of its
  // opening after the meta, and the tag of its tensors, if any, after those.
  // REQUIRES: authenticate() with frames authenticated.
  std::vector<std::byte> seal(std::vector<std::byte> frame) {
    namespace ff = frame_format;
    ff::store_le(std::span(frame).subspan(ff::kCrcOffset), uint32_t{0});
    const uint64_t number = frames_sealed_++;
    const size_t opening = ff::kHeaderBytes + ff::kMetaLenBytes +
                           ff::load_le<uint32_t>(std::span(frame).subspan(ff::kHeaderBytes));
    const std::span<const std::byte> bytes(frame);
    std::vector<std::byte> sealed(frame.begin(), frame.begin() + static_cast<ptrdiff_t>(opening));
    const auto add_tag = [&](std::span<const std::byte> part, FramePart which) {
      mac_->begin(number, which);
      mac_->update(part);
      const FrameTag tag = mac_->tag();
      sealed.insert(sealed.end(), tag.begin(), tag.end());
    };
    add_tag(bytes.first(opening), FramePart::kOpening);
    if (frame.size() > opening) {
      sealed.insert(sealed.end(), bytes.begin() + static_cast<ptrdiff_t>(opening), bytes.end());
      add_tag(bytes.subspan(opening), FramePart::kTensors);
    }
    return sealed;
  }

  // One whole frame (header and payload), validated.
  std::vector<std::byte> read_frame() {
    std::vector<std::byte> frame(frame_format::kHeaderBytes);
    stream_->read_exact(frame, deadline());
    const auto header = decode_header(std::span(frame).first<frame_format::kHeaderBytes>(), 1024);
    frame.resize(frame_format::kHeaderBytes + header.payload_len);
    stream_->read_exact(std::span(frame).subspan(frame_format::kHeaderBytes), deadline());
    decode_frame(frame, 1024, 1024);
    return frame;
  }

  // An authenticated connection's frame, header and payload, its tags read and not checked.
  std::vector<std::byte> read_tagged_frame() {
    namespace ff = frame_format;
    std::vector<std::byte> frame(ff::kHeaderBytes + ff::kMetaLenBytes);
    stream_->read_exact(frame, deadline());
    const uint64_t payload_len =
        decode_header(std::span(frame).first<ff::kHeaderBytes>(), 1 << 20).payload_len;
    const size_t opening =
        frame.size() + ff::load_le<uint32_t>(std::span(frame).subspan(ff::kHeaderBytes));
    frame.resize(opening);
    stream_->read_exact(std::span(frame).subspan(ff::kHeaderBytes + ff::kMetaLenBytes), deadline());
    FrameTag tag;
    stream_->read_exact(tag, deadline());
    frame.resize(ff::kHeaderBytes + payload_len);
    if (frame.size() > opening) {
      stream_->read_exact(std::span(frame).subspan(opening), deadline());
      stream_->read_exact(tag, deadline());
    }
    return frame;
  }

  // Whether the other side closes the connection (end of stream, or a reset) within kPatience.
  bool closed_by_other_side() {
    std::byte sink[4096];
    try {
      while (stream_->read_some(sink, deadline()) > 0) {
      }
      return true;
    } catch (const TransportError& error) {
      return std::string(error.what()).find("timed out") == std::string::npos;
    }
  }

 private:
  static constexpr size_t meta_offset() {
    return frame_format::kHeaderBytes + frame_format::kMetaLenBytes;
  }
  static IoDeadline deadline() { return {.until = SteadyClock::now() + kPatience}; }

  std::unique_ptr<TcpStream> stream_;
  ProcessKey process_key_ = ProcessKey::from_seed(7);
  std::unique_ptr<FrameMac> mac_;
  uint64_t frames_sealed_ = 0;
};

// Routes spdlog's default logger into memory for the lifetime of the object. Create it before
// the server whose log it reads, so that the server's threads are joined before it is removed.
class LogCapture {
 public:
  LogCapture()
      : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(128)),
        previous_(spdlog::default_logger()) {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink_));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::string text() const {
    std::string all;
    for (const auto& line : sink_->last_formatted()) all += line;
    return all;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace dtrain::testing
