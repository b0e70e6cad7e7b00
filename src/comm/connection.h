// A connected, authenticated peer: frames out and in over one TCP connection (format in
// comm/frame_format.h), with tensors sent from and received into the caller's memory. Blocking I/O
// on a thread per connection, deliberately: a task has few peers and large payloads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/stop_request.h"
#include "comm/auth.h"
#include "comm/frame.h"
#include "comm/frame_format.h"
#include "comm/frame_mac.h"
#include "comm/peer_wait.h"
#include "comm/tcp_stream.h"

namespace dtrain {

struct ConnectionOptions {
  // Names the peer in errors and logs, e.g. "ps0"; the address is always shown too.
  std::string task_name;
  // A frame announcing a longer payload is refused before anything is allocated for it, and so is
  // a meta block over max_meta_bytes (meta is buffered; tensors are not).
  uint64_t max_payload_bytes = uint64_t{1} << 30;
  uint64_t max_meta_bytes = uint64_t{16} << 20;
  // A send, or a frame once its first byte has arrived, fails with TransportError when no byte
  // moves for this long: a dead or partitioned peer. Negative: never.
  int io_timeout_ms = 30'000;
  // How long receive() waits for the next frame to begin. Negative: forever (a quiet peer may just
  // be idle).
  int idle_timeout_ms = -1;
  // A peer whose kernel acknowledges nothing for this long, not even the keepalive probes of a
  // quiet connection, is lost: its host died or the network is cut (TcpStream::
  // set_liveness_timeout). connect() also gives up one attempt after this long and tries again,
  // so that a link that comes back is used at once. Negative: the kernel's defaults (minutes).
  int liveness_timeout_ms = 10'000;
  // connect(): total time for connect-with-retry before giving up.
  int connect_timeout_ms = 30'000;
  // connect(): while it retries, a "still waiting for <task> at <address> (<last error>); N s
  // left" line to wait_report every wait_report_interval_ms (none if empty); a stop request ends
  // the wait with StopRequested (none if null).
  std::function<void(const std::string&)> wait_report;
  int wait_report_interval_ms = 10'000;
  const StopRequest* stop = nullptr;
  // connect(): a reason to stop retrying at once, as PeerWaitOptions::abandon (none if empty).
  std::function<std::string()> abandon_wait;
  // The whole handshake, either side, must finish within this.
  int handshake_timeout_ms = 10'000;
  // Who this end is, said in the handshake and bound to the connection ("worker 1", "ps 0"; empty
  // for a tool): the other side reads it as peer_identity(). At most kMaxIdentityBytes of
  // printable ASCII.
  std::string identity;
  // Every frame after the handshake carries a GMAC tag (comm/frame_mac.h) in place of the CRC.
  // Both ends must agree, or the handshake fails saying so; off only by an explicit flag.
  bool authenticate_frames = true;
  // Which process this end is, said in the handshake beside the identity and, by a client, proved
  // (comm/process_key.h). 0: this process's own key; tests that play several processes in one
  // set their own number, from which a key is derived.
  uint64_t incarnation = 0;
  // The protocol's rule of which frame types may carry tensors: a frame of another type that
  // declares tensor bytes is a FrameError, raised once its opening is authenticated and before it
  // is returned. Null: any type may.
  bool (*type_carries_tensors)(uint16_t type) = nullptr;
};

// A server's say, during the handshake, over a client that has proved the secret: "" admits it,
// anything else is the reason it is refused (sent to it in a REFUSED frame, and thrown).
using Admission = std::function<std::string(const HandshakeParams& client)>;

// States move forward only: kHandshaking -> kOpen -> kClosed, or kHandshaking -> kClosed.
//
// A failed connection stays failed: after any TransportError (FrameError, AuthError) from a call,
// or close(), the connection is kClosed, its socket is shut down (waking a thread blocked in the
// other direction), and every later call throws the first error again. std::logic_error reports a
// broken precondition and changes nothing.
//
// Thread-safety: one sender thread (send) and one receiver thread (receive, receive_tensors,
// discard_tensors) may use a connection at the same time; close(), is_open() and peer() are safe
// from any thread. The handshake and set_task_name require that no other thread uses it.
class Connection {
 public:
  // Wraps a connected stream; the caller then runs one handshake. (Use connect() or
  // comm/server.h rather than this.)
  Connection(std::unique_ptr<TcpStream> stream, ConnectionOptions options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // The two ends of the handshake in comm/auth.h; `secret` is the cluster secret's raw bytes.
  // Throw AuthError if the peer fails it or rejects us (a client refused by `admit` included),
  // TransportError / FrameError otherwise. REQUIRES: kHandshaking.
  void handshake_as_client(std::string_view secret);
  void handshake_as_server(std::string_view secret, const Admission& admit = {});
  // The server's side without blocking, for one thread that drives every connection still
  // authenticating (comm/server.h): each call makes the progress the socket allows now and
  // returns true once the connection is open. In between, the caller waits for the socket to be
  // readable, or writable if handshake_wants_write(), and bounds the whole by
  // handshake_timeout_ms itself. Throws as handshake_as_server.
  // REQUIRES: kHandshaking; the same secret and admit at every call.
  bool continue_handshake_as_server(std::string_view secret, const Admission& admit = {});
  bool handshake_wants_write() const { return sending_; }

  // Sends one frame: the meta block, then each tensor's floats in order, gathered into a single
  // write straight from the caller's memory (nothing is copied; the CRC is chained over the
  // pieces). Blocks until the kernel has taken the last byte.
  // REQUIRES: kOpen; type >= frame_format::kFirstUserType.
  void send(uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
            std::span<const std::span<const float>> tensors);

  struct Incoming {
    uint16_t type = 0;
    uint64_t request_id = 0;
    std::span<const std::byte> meta;  // valid until the next receive()
    uint64_t tensor_bytes = 0;        // still to be read by receive_tensors / discard_tensors
  };
  // Reads the next frame's header and meta block. Types below kFirstUserType are a FrameError.
  // Where frames are tagged, the header and meta are authenticated before they are returned
  // (FrameError "frame N from <peer> failed authentication" if not). If tensor_bytes > 0 the
  // caller must next call receive_tensors or discard_tensors, which check the tensors' tag (or the
  // CRC): nothing that depends on the tensors may be done before one of them returns, and with
  // --unauthenticated_frames, whose one CRC covers the whole frame, nothing at all. With
  // tensor_bytes == 0 the frame is wholly checked here (and calling receive_tensors with empty
  // spans is allowed, not required).
  // REQUIRES: kOpen; the previous frame's tensor bytes, if any, consumed.
  Incoming receive();
  // Reads the frame's tensor bytes straight into `into`, in order, then checks the CRC (FrameError
  // "bad CRC32C from <peer>"; what was written into `into` must then not be used). The sizes must
  // add up to tensor_bytes, else FrameError. REQUIRES: a receive() whose tensors are unread.
  void receive_tensors(std::span<const std::span<float>> into);
  // Reads and drops the frame's tensor bytes, checking the CRC. REQUIRES: as receive_tensors.
  void discard_tensors();

  // ---- Non-blocking frames, for one thread that drives several connections at once
  // (collective/tcp_ring.h). Each call makes the progress the socket allows now and never waits;
  // TcpStream::wait_either is how the caller waits for more. The same format, limits and checks
  // as the blocking calls, which must not be mixed with these in the middle of a frame.

  // Begins sending a frame as send() would; meta and tensors are referenced, not copied, and must
  // stay valid until continue_send() returns true. REQUIRES: kOpen; no frame still being sent.
  void start_send(uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
                  std::span<const std::span<const float>> tensors);
  // Writes what the socket takes of the frame being sent; true once all of it is written (and
  // when no frame is being sent).
  bool continue_send();
  // Reads what has arrived of the next frame's header and meta; returns the frame once both are
  // in, with receive()'s contract.
  std::optional<Incoming> try_receive();
  // Reads what has arrived of the frame's tensors into `into` (the same span at every call); true
  // once all are in and the CRC has been checked (FrameError if it fails, as receive_tensors).
  // REQUIRES: try_receive() returned a frame whose tensors are unread.
  bool try_receive_tensors(std::span<float> into);
  // Bytes moved so far, both directions: how a caller tells whether a call made progress.
  uint64_t bytes_moved() const { return bytes_moved_; }
  const TcpStream& stream() const { return *stream_; }

  // Closes the connection (shuts the socket down, waking blocked calls); later calls throw
  // TransportError "connection to <peer> was closed locally". Idempotent.
  void close();
  bool is_open() const;
  // Whether the connection ended because the peer closed it between frames: a normal end.
  bool closed_by_peer() const;

  // What the peer said of itself in the handshake (comm/auth.h), proved with the secret.
  // REQUIRES: the handshake has succeeded.
  const std::string& peer_identity() const { return peer_params_.identity; }
  // Which process the peer is (HandshakeParams::incarnation); a client's is proved.
  uint64_t peer_incarnation() const { return peer_params_.incarnation(); }
  bool frames_authenticated() const { return send_mac_ != nullptr; }

  // "10.0.0.7:2222", or "ps0 (10.0.0.7:2222)" with a task name.
  const std::string& peer() const { return stream_->peer(); }
  const std::string& address() const { return stream_->address(); }
  void set_task_name(std::string_view task_name) { stream_->set_task_name(task_name); }

 private:
  enum class State { kHandshaking, kOpen, kClosed };

  void send_frame(uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
                  std::span<const std::span<const float>> tensors, const IoDeadline& deadline);
  // Checks a frame against the limits, and lays it out in send_pieces_ with its CRC in the header,
  // or, where frames are tagged, with the opening's tag after the meta and, if tag_tensors_now,
  // the tensors' tag as the last piece.
  void prepare_frame(uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
                     std::span<const std::span<const float>> tensors, bool tag_tensors_now);
  // The checks of a frame's opening, shared by receive_frame and try_receive: the header's (noting
  // the frame's type, request id, length and CRC), then the meta length's.
  void accept_header(std::span<const std::byte, frame_format::kHeaderBytes> header_bytes,
                     uint64_t max_payload_bytes, bool handshake);
  PayloadLayout accept_meta_len(std::span<const std::byte, frame_format::kMetaLenBytes> meta_len);
  // The protocol's rule (ConnectionOptions::type_carries_tensors) for the frame just opened.
  void check_tensors_allowed() const;
  // Once the meta block is in: starts the frame's check (CRC or tag) over its opening.
  void absorb_opening(std::span<const std::byte, frame_format::kHeaderBytes> header_bytes,
                      std::span<const std::byte, frame_format::kMetaLenBytes> meta_len);
  // Where frames are tagged, once the opening's tag is in: checks it (FrameError if it fails) and
  // starts the tensors' tag.
  void check_opening();
  // The next received bytes of the frame, into its CRC or tag.
  void absorb(std::span<const std::byte> bytes);
  Incoming incoming() const;
  Incoming receive_frame(const IoDeadline& first_byte, const IoDeadline& rest,
                         uint64_t max_payload_bytes, bool handshake);
  void read_tensor_bytes(std::span<std::byte> into);
  // Once the whole payload is in: reads the tensors' tag, if frames carry one, and checks the
  // frame (blocking, or as far as the socket allows now: false until the tag is in). FrameError
  // "bad CRC32C from <peer>" or "frame N from <peer> ... failed authentication" if it does not
  // match.
  void finish_frame(const IoDeadline& deadline);
  bool try_finish_frame();
  void check_frame();
  // A handshake frame of type `type` carrying min_meta..max_meta bytes of meta; throws otherwise.
  std::span<const std::byte> expect_handshake_frame(uint16_t type, size_t min_meta, size_t max_meta,
                                                    const IoDeadline& deadline);
  std::span<const std::byte> check_handshake_frame(const Incoming& in, uint16_t type,
                                                   size_t min_meta, size_t max_meta) const;
  void send_auth_failed_quietly(const IoDeadline& deadline);
  // The server's side, one step at a time (continue_handshake_as_server).
  struct ServerHandshake;
  bool advance_server_handshake(ServerHandshake& h, std::string_view secret,
                                const Admission& admit);
  // Starts sending the server's last handshake frame; `failure`, if any, is thrown once it is out.
  void answer(ServerHandshake& h, uint16_t type, std::span<const std::byte> meta,
              std::optional<AuthError> failure);
  // try_receive's work, under the limits of the handshake or of the frames after it.
  std::optional<Incoming> try_receive_frame(uint64_t max_payload_bytes, bool handshake);
  void start_handshake_frame(uint16_t type, std::span<const std::byte> meta);
  // continue_send's work: writes what the socket takes; true once the frame is out.
  bool pump_send();
  HandshakeParams own_params() const;
  // A peer whose setting for frame authentication differs from ours: what to tell the user.
  std::string mismatched_frames_error(const HandshakeParams& peer) const;
  void open_after_handshake(const HandshakeParams& peer, const FrameKey* send_key,
                            const FrameKey* receive_key);

  // Throws the stored error if closed; else if the state is not `required`, std::logic_error.
  void check_state(State required, const char* call) const;
  // Runs `body`; a TransportError escaping it closes the connection and the first error stored is
  // rethrown.
  template <typename Body>
  auto guarded(Body&& body);
  // Moves to kClosed storing `error` unless already closed, shuts the socket down, and throws the
  // first error stored. `by_peer`: the peer closed the connection between frames.
  [[noreturn]] void fail(std::exception_ptr error, bool by_peer = false);

  IoDeadline io_deadline() const;

  // The key this end's handshake says and, as a client, proves it holds.
  const ProcessKey& process_key() const { return test_key_ ? *test_key_ : ProcessKey::own(); }

  std::unique_ptr<TcpStream> stream_;
  const ConnectionOptions options_;
  std::optional<ProcessKey> test_key_;  // from options_.incarnation, when set

  mutable std::mutex mutex_;
  State state_ = State::kHandshaking;  // guarded by mutex_
  std::exception_ptr error_;           // guarded by mutex_; set on the move to kClosed
  bool closed_by_peer_ = false;        // guarded by mutex_

  std::unique_ptr<ServerHandshake> server_handshake_;  // while the server's side is under way
  // Set by the handshake: what the peer said, and the frames' keys when they are authenticated.
  HandshakeParams peer_params_;
  std::unique_ptr<FrameMac> send_mac_;     // sender thread only
  std::unique_ptr<FrameMac> receive_mac_;  // receiver thread only
  uint64_t frames_sent_ = 0;               // sender thread only: the next frame's number
  uint64_t frames_received_ = 0;           // receiver thread only

  // Sender thread only: the frame being sent, its pieces reused so send() does not allocate.
  std::vector<std::span<const std::byte>> send_pieces_;
  std::array<std::byte, frame_format::kHeaderBytes> send_header_{};
  std::array<std::byte, frame_format::kMetaLenBytes> send_meta_len_{};
  uint64_t send_frame_number_ = 0;  // of the frame being sent, where frames are tagged
  FrameTag send_opening_tag_{};
  FrameTag send_tensor_tag_{};
  std::vector<std::span<const std::byte>> send_batch_;  // send(): the pieces of one write
  size_t send_piece_ = 0;   // start_send: the first piece not wholly written
  size_t send_offset_ = 0;  // and the bytes of it that are
  bool sending_ = false;    // start_send has a frame not yet wholly written

  // Receiver thread only: the frame being received.
  std::vector<std::byte> meta_;     // reused; grows to the largest meta seen
  std::vector<std::byte> discard_;  // scratch for discard_tensors, allocated on first use
  bool frame_unconsumed_ = false;   // received; receive_tensors / discard_tensors not yet called
  uint64_t tensor_bytes_ = 0;
  uint32_t receive_crc_ = 0;   // CRC-32C of the frame so far
  uint32_t expected_crc_ = 0;  // from its header
  uint64_t receive_frame_number_ = 0;
  FrameTag receive_tag_{};  // the opening's tag, then the tensors', as each arrives
  size_t tag_have_ = 0;
  bool frame_checked_ = false;  // the frame's CRC or tag has been checked
  uint16_t receive_type_ = 0;
  uint64_t receive_request_id_ = 0;
  uint64_t receive_payload_len_ = 0;
  // try_receive's progress through a frame: the header and meta length, then the meta, then the
  // tensors.
  std::array<std::byte, frame_format::kHeaderBytes + frame_format::kMetaLenBytes> prefix_{};
  size_t prefix_have_ = 0;
  bool header_accepted_ = false;
  bool prefix_done_ = false;
  size_t meta_have_ = 0;
  bool opening_absorbed_ = false;
  bool opening_checked_ = false;
  uint64_t tensors_have_ = 0;

  uint64_t bytes_moved_ = 0;
};

// Connects to host:port with retry, then runs the client handshake. Retries with exponential
// backoff (comm/peer_wait.h) for options.connect_timeout_ms, so tasks may start in any order,
// saying so every options.wait_report_interval_ms; an attempt that gets no answer at all (a cut
// link drops it) is given up after options.liveness_timeout_ms and made again; then throws
// TransportError "could not reach <task> at host:port within N s (K attempts): <last error>".
// Throws AuthError if the server fails the handshake or rejects us, StopRequested as soon as
// options.stop is requested.
std::unique_ptr<Connection> connect(const std::string& host, uint16_t port, std::string_view secret,
                                    const ConnectionOptions& options);
// The same within a wait the caller owns (its deadline, reports, stop and give-up line), which
// its own retries around this one share.
std::unique_ptr<Connection> connect(const std::string& host, uint16_t port, std::string_view secret,
                                    const ConnectionOptions& options, PeerWait& wait);
// The wait connect() makes for host:port from options.
PeerWaitOptions connect_wait_options(const std::string& host, uint16_t port,
                                     const ConnectionOptions& options);

}  // namespace dtrain
