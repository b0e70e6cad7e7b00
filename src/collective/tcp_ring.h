// RingLinks over comm/: each rank listens for its left neighbour and connects to its right one.
// Both ends authenticate with the cluster secret and check that they agree on the ring's size,
// their ranks and a fingerprint of what they run. The calling thread drives both connections
// without blocking on either (the progress loop of MPI implementations): while it waits for a chunk
// from the left, queued chunks flow to the right, with no thread hand-offs on the hot path.
//
// Failure: the first rank to find a neighbour lost (connection closed) or stuck (no byte for
// timeout_ms, while the ranks that are merely waiting send keepalives) stops with a
// CollectiveError naming it, and sends an abort with that message to its right; each rank passes
// it on, so every rank stops with the same message instead of waiting for its own timeout.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/cluster_spec.h"
#include "collective/ring_links.h"
#include "comm/connection.h"
#include "comm/meta_codec.h"
#include "comm/server.h"

namespace dtrain {

struct TcpRingOptions {
  int size = 1;
  int rank = 0;
  // Where to listen for the left neighbour; port 0 lets the system pick (TcpRing::port()).
  std::string bind_host = "0.0.0.0";
  uint16_t port = 0;
  std::string secret;  // the cluster secret, raw bytes
  // Ranks whose fingerprint differs (another model, another layout) are refused by name.
  uint64_t fingerprint = 0;
  // How long to wait for the ring to form, and how long a neighbour may move no byte inside a
  // collective before it is declared lost (--collective_timeout).
  int timeout_ms = 60'000;
  // Before sleeping in poll(), a waiting rank retries for this long: a sleep and its wake-up cost
  // more than a chunk's transfer on loopback. 0: sleep at once. See ring_spin_us().
  int spin_us = 50;
  std::string job = "worker";  // ranks are named "<job><rank>" in messages
};

// The spin that suits `ranks_here` ranks sharing this machine's cores: retrying pays while every
// rank has a core of its own, and only steals time from the others once they outnumber the cores.
int ring_spin_us(int ranks_here);

// Thread-safety: one thread makes every call except port() and rank_name().
class TcpRing final : public RingLinks {
 public:
  // Listens for the left neighbour (size > 1). Throws TransportError if it cannot listen.
  explicit TcpRing(TcpRingOptions options);
  ~TcpRing() override;
  TcpRing(const TcpRing&) = delete;
  TcpRing& operator=(const TcpRing&) = delete;

  uint16_t port() const;

  // Connects to the right neighbour and waits for the left one to connect to us. Throws
  // CollectiveError if either does not join within timeout_ms or refuses us, AuthError for a wrong
  // secret. Every rank must call it. REQUIRES: not yet connected.
  void connect(const HostPort& right);

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  void send_right(std::span<const float> data, ChunkTag tag) override;
  void recv_left(std::span<float> into, ChunkTag tag) override;
  void wait_sent() override;

  // Stops this rank's part in the ring: the ranks to the right are told `reason` (which should
  // name this rank's failure) and every later call throws. Idempotent; the first reason wins.
  void abort(std::string_view reason);

  std::string rank_name(int rank) const;  // "worker3"

 private:
  struct Outgoing {
    std::span<const float> data;
    ChunkTag tag;
    bool keepalive = false;  // a kRingKeepalive rather than a chunk
  };
  // What a progress loop waits for.
  enum class Want { kChunk, kSent };

  // Forming the ring. serve_left is the server's handler for a connection: it checks the hello,
  // adopts the connection as the left link (or refuses it), and holds it open until destruction.
  void serve_left(Connection& connection);
  std::string refusal_for(int size, int rank, uint64_t fingerprint, std::string_view peer) const;
  void wait_for_left(SteadyClock::time_point deadline);
  // " (this rank refused a peer: <why>)" when it has, for the errors of a ring that did not form:
  // the refused peer is usually the rank that never arrived.
  std::string refusal_note();
  int left_rank() const;
  int right_rank() const;

  // The progress loop: moves bytes both ways until `want` holds; throws CollectiveError naming
  // the neighbour at fault. recv_into is the chunk's destination for kChunk.
  void progress(Want want, std::span<float> recv_into, ChunkTag tag);
  // Writes queued frames as far as the socket takes them; returns whether a byte moved.
  bool pump_sends();
  // Reads what has arrived of the expected chunk; returns true once it is all in. Throws the
  // failure a kRingAbort carries, or CollectiveError for a chunk the ranks disagree on.
  bool pump_receive(std::span<float> into, ChunkTag tag);
  // Sleeps until a neighbour can move bytes or `until`.
  void wait_for_io(bool reading, SteadyClock::time_point until) const;

  // Failure: records `message` (the first one wins), tells the right neighbour unless that link
  // is what broke, and throws it as a CollectiveError.
  [[noreturn]] void fail(const std::string& message, bool right_broken);
  void send_abort(const std::string& message);
  // After our right link broke, our left neighbour may still be sending to us; read on until the
  // abort that is on its way round the ring has reached it (bounded by timeout_ms), so it learns
  // the real culprit rather than finding this rank gone.
  void drain_left();
  void throw_if_failed() const;
  // "lost worker2: <what> (seen by worker3)"
  std::string lost_message(int peer, std::string_view what) const;

  const TcpRingOptions options_;
  std::unique_ptr<Server> server_;     // accepts the left neighbour; null when size == 1
  std::unique_ptr<Connection> right_;  // we send on it
  Connection* left_ = nullptr;         // we receive on it; owned by server_'s handler

  std::vector<Outgoing> queue_;  // queue_[head_..] not yet wholly sent; reused, never shrunk
  size_t head_ = 0;
  bool head_started_ = false;     // queue_[head_] is in right_'s start_send / continue_send
  MetaWriter send_meta_;          // the meta of queue_[head_], alive while it is being sent
  bool chunk_header_in_ = false;  // the left link is inside a chunk's tensors
  uint64_t incoming_bytes_ = 0;   // and this is their length
  std::exception_ptr failure_;    // the first failure, a CollectiveError

  std::mutex mutex_;  // for forming and closing the ring: left_, closing_, last_refusal_
  std::condition_variable membership_;
  bool closing_ = false;
  std::string last_refusal_;
};

}  // namespace dtrain
