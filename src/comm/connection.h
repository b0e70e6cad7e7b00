// A connected, authenticated peer: frames out and in over one TCP connection (comm/frame_format.h),
// tensors sent from and received into the caller's memory, by value or, as the link step after the
// handshake chose (comm/link_setup.h), by reference (comm/memory_link.h): every call works the same
// either way. Blocking I/O on a thread per connection, deliberately: a task has few peers and large
// payloads. Sending: comm/frame_writer.h; receiving: comm/frame_reader.h; opening: comm/connect.h.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "comm/auth.h"
#include "comm/connection_options.h"
#include "comm/frame.h"
#include "comm/frame_format.h"
#include "comm/frame_mac.h"
#include "comm/frame_reader.h"
#include "comm/frame_writer.h"
#include "comm/link.h"
#include "comm/memory_link.h"
#include "comm/peer_memory.h"
#include "comm/tcp_stream.h"
#include "comm/waitable.h"

namespace dtrain {

class ServerHandshake;
struct PeerTraffic;

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

  // The two ends of the handshake (comm/auth.h, run by comm/handshake.h); `secret` is the cluster
  // secret's raw bytes. The client then runs the link step; a server answers it in its first
  // receive() (which a server must make before it sends).
  // Throw AuthError if the peer fails it or rejects us (a client refused by `admit` included),
  // LinkRefused (comm/link_setup.h) for a link --transport shm cannot have, TransportError /
  // FrameError otherwise. REQUIRES: kHandshaking.
  void handshake_as_client(std::string_view secret);
  void handshake_as_server(std::string_view secret, const Admission& admit = {});
  // The server's side without blocking, for one thread that drives every connection still
  // authenticating (comm/server.h): each call makes the progress the socket allows now and
  // returns true once the connection is open. In between, the caller waits for the socket to be
  // readable, or writable if handshake_wants_write(), and bounds the whole by
  // handshake_timeout_ms itself. Throws as handshake_as_server.
  // REQUIRES: kHandshaking; the same secret and admit at every call.
  bool continue_handshake_as_server(std::string_view secret, const Admission& admit = {});
  bool handshake_wants_write() const { return writer_.busy(); }

  // Sends one frame: the meta block, then each tensor's floats in order, gathered into a single
  // write straight from the caller's memory (nothing is copied; the CRC is chained over the
  // pieces). Blocks until the kernel has taken the last byte, or, by reference, until the peer
  // has copied the tensors out: either way the caller may then change them.
  // REQUIRES: kOpen; type >= frame_format::kFirstUserType.
  void send(uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
            std::span<const std::span<const float>> tensors);

  // send() without its wait for the peer: by reference, returns once the frame is out, and the
  // tensors must stay unchanged until settle() (or sends_settled()); by value it is send(). For a
  // sender that has more to do before the peer copies (the next requests, reading replies).
  void post(uint16_t type, uint64_t request_id, std::span<const std::byte> meta,
            std::span<const std::span<const float>> tensors);
  // Blocks until every tensor posted so far is the caller's again (by value, at once). Throws as
  // send() when the peer copies nothing within io_timeout_ms or its process has gone.
  // REQUIRES: kOpen; called by the sender thread.
  void settle();

  // By reference: tells the peer that our next frame's tensor of exactly into.size() floats may
  // be written straight into `into` (comm/memory_link.h's landings), saving the copy out of its
  // memory; `into` must then be left alone until that frame's receive_tensors, which finds it in
  // place (or copies it from there into what it is given). Offers are used in order, by frames
  // with one tensor and a small meta block. By value: nothing. Sender thread; not while a
  // start_send's frame is being sent.
  void offer_landing(std::span<float> into);

  using Incoming = IncomingFrame;  // type, request_id, meta (until the next receive), tensor_bytes
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
  // waiting on waitable() (comm/waitable.h) is how the caller waits for more. The same format,
  // limits and checks as the blocking calls, which must not be mixed with these in the middle of a
  // frame.

  // Begins sending a frame as send() would; meta and tensors are referenced, not copied, and must
  // stay valid until continue_send() returns true, and the tensors, by reference, unchanged until
  // sends_settled(). REQUIRES: kOpen; no frame still being sent.
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
  // Whether a frame from the peer has arrived, or begun to, and is not received yet: by the
  // receiver thread, to choose between answering now and reading on first.
  bool input_waiting();
  // Bytes moved so far, both directions (by reference, the tensors copied and the records passed):
  // how a caller tells whether a call made progress.
  uint64_t bytes_moved() const { return bytes_moved_ + reader_.bytes_read(); }
  // What a thread waits on (comm/waitable.h) for this connection to be readable or writable.
  Waitable waitable(bool read, bool write) const { return stream_->waitable(read, write); }

  // ---- The link the link step chose. By reference, the receiver copies tensors out of this
  // process's memory, and frames with tensors pass through a mailbox page the two share.
  LinkTraits link_traits() const { return {.in_memory = link_ != nullptr}; }
  // Which way payloads go, for a start-up line: "shm", "tcp (congestion control cubic)", or with
  // why a client that asked for memory has TCP: "tcp (ps0 was started with --transport tcp;
  // congestion control cubic)".
  std::string describe_link() const;
  // The congestion control this connection's socket runs (comm/tcp_congestion.h).
  std::string congestion_control() const;
  // Why a client that asked for payloads by reference has them by value ("ps0 was started with
  // --transport tcp"); empty otherwise.
  const std::string& why_by_value() const { return why_by_value_; }
  // This end's numeric address: the interface through which the peer is reached
  // (comm/local_address.h).
  std::string local_host() const;
  // The socket under the connection, for tests that ask the kernel about it themselves.
  int socket_fd() const { return stream_->native_handle(); }
  // Non-blocking: every frame's tensors sent so far are the caller's again (by value always; by
  // reference once the peer has acknowledged copying them), and how many the peer acknowledged.
  bool sends_settled() { return link_ == nullptr || link_->sends_settled(); }
  uint64_t payloads_acknowledged() const { return link_ ? link_->acknowledged() : 0; }
  // Around a wait on waitable() (comm/waitable.h) by the thread that drives the non-blocking
  // calls: by reference, tells the peer in the mailbox to wake this side with a frame when it
  // posts, and returns false if something came meanwhile (then do not sleep).
  bool begin_wait() { return link_ == nullptr || link_->begin_wait(); }
  void end_wait() {
    if (link_) link_->end_wait();
  }

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
  bool frames_authenticated() const { return writer_.tagged(); }

  // "10.0.0.7:2222", or "ps0 (10.0.0.7:2222)" with a task name.
  const std::string& peer() const { return stream_->peer(); }
  const std::string& address() const { return stream_->address(); }
  void set_task_name(std::string_view task_name) { stream_->set_task_name(task_name); }

 private:
  enum class State { kHandshaking, kOpen, kClosed };

  // ---- For the link step (comm/link_setup.cc) and payloads by reference (comm/memory_link.cc).
  friend class LinkStep;
  friend class MemoryLink;
  // Whether `in` is the protocol's; else handles the reserved frame: answers a link offer (the
  // server's side of the link step), throws a refusal, drops a wake.
  bool take_link_frames(const Incoming& in);
  void send_link_frame(uint16_t type, std::span<const std::byte> meta);
  Incoming receive_link_frame();

  // The reader's next frame (FrameReader::read, try_read, under the limits of the handshake or of
  // the frames after it), noted as the frame being received; the peer closing between frames
  // fails the connection as closed by the peer.
  Incoming receive_frame(const IoDeadline& first_byte, const IoDeadline& rest,
                         uint64_t max_payload_bytes, bool handshake);
  std::optional<Incoming> try_receive_frame(uint64_t max_payload_bytes, bool handshake);
  Incoming received(const Incoming& in);
  // The protocol's rule (ConnectionOptions::type_carries_tensors) for the frame being received.
  void check_tensors_allowed() const;
  // FrameError naming the peer unless the frame being received carries `expected` tensor bytes.
  void check_tensor_sizes(uint64_t expected) const;
  void open_after_handshake(const HandshakeParams& peer, const FrameKey* send_key,
                            const FrameKey* receive_key);

  // ---- For comm/handshake.cc: the handshake's frames, under its limits (a peer that has not
  // proved the secret may make us read only a tiny frame), in either mode.
  friend class ClientHandshake;
  friend class ServerHandshake;
  void send_handshake_frame(uint16_t type, std::span<const std::byte> meta,
                            const IoDeadline& deadline);
  Incoming receive_handshake_frame(const IoDeadline& deadline);
  std::optional<Incoming> try_receive_handshake_frame();
  // Starts sending a handshake frame without blocking; pump_send() writes on.
  void start_handshake_frame(uint16_t type, std::span<const std::byte> meta);
  // continue_send's work: writes what the socket takes; true once the frame is out.
  bool pump_send() { return writer_.pump(bytes_moved_); }

  // The process's transport counters (comm/transport_counters.h): a frame going out, and the
  // first failure, if it is a refusal.
  void count_sent(std::span<const std::byte> meta, std::span<const std::span<const float>> tensors);
  void count_rejection(const std::exception_ptr& error, bool was_open) const;
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
  PeerTraffic* traffic_ = nullptr;  // the peer's counters, once it is known

  // Sender thread only (the handshake's before it); by reference, the receiver's may write a wake
  // frame under write_mutex_, or leave it to the sender (wake_pending_) while a frame is out.
  FrameWriter writer_;
  std::mutex write_mutex_;
  std::atomic<bool> wake_pending_ = false;
  // The link step's outcome, set before the connection is used by two threads (in the client's
  // handshake, in a server's first receive): by reference when link_ is set.
  std::unique_ptr<MemoryLink> link_;
  std::string why_by_value_;
  bool server_side_ = false;
  enum class LinkState : uint8_t { kAwaited, kOffered, kDone } link_step_ = LinkState::kAwaited;

  // Receiver thread only: the frames in, and the one being received (by value from the reader,
  // by reference from the link).
  FrameReader reader_;
  bool frame_unconsumed_ = false;  // received; receive_tensors / discard_tensors not yet called
  uint16_t receive_type_ = 0;
  uint64_t receive_request_id_ = 0;
  uint64_t tensor_bytes_ = 0;
  uint64_t bytes_moved_ = 0;  // but the reader's own
};

template <typename Body>
auto Connection::guarded(Body&& body) {
  try {
    return body();
  } catch (const PeerProcessGone&) {
    // By reference, the peer's process has gone: its socket is closing too, and the loss is the
    // one a peer that closed the connection makes, counted and reported alike.
    fail(std::current_exception(), /*by_peer=*/true);
  } catch (const TransportError&) {
    fail(std::current_exception());
  }
}

}  // namespace dtrain
