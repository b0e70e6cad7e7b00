// RingLinks over comm/: each rank listens for its left neighbour and connects to its right one.
// Both ends authenticate with the cluster secret and check that they agree on the ring's size,
// their ranks and a fingerprint of what they run. Each connection carries frames both ways (the
// ring algorithms use it one way, halving-doubling both). The calling thread drives both
// connections without blocking on either (the progress loop of MPI implementations): while it
// waits for a chunk from one neighbour, queued chunks flow out, with no thread hand-offs on the
// hot path.
//
// Failure: the first rank to find a neighbour lost (connection closed) or stuck (no byte for
// timeout_ms, while the ranks that are merely waiting send keepalives) stops with a
// CollectiveError naming it, and sends an abort with that message to its other neighbour; each
// rank passes it on, so every rank stops with the same message instead of waiting for its own
// timeout.
#pragma once

#include <condition_variable>
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
  std::string secret;               // the cluster secret, raw bytes
  bool authenticate_frames = true;  // ConnectionOptions::authenticate_frames
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
  void send(Side to, std::span<const float> data, ChunkTag tag) override;
  void recv(Side from, std::span<float> into, ChunkTag tag) override;
  void wait_sent() override;

  // Stops this rank's part in the ring: both neighbours are told `reason` (which should name this
  // rank's failure) and every later call throws. Idempotent; the first reason wins.
  void abort(std::string_view reason);

  std::string rank_name(int rank) const;  // "worker3"

 private:
  struct Outgoing {
    std::span<const float> data;
    ChunkTag tag;
    bool keepalive = false;  // a kRingKeepalive rather than a chunk
  };
  // One neighbour: the frames queued for it and where its incoming frame stands.
  struct Link {
    std::vector<Outgoing> queue;  // queue[head..] not yet wholly sent; reused, never shrunk
    size_t head = 0;
    bool head_started = false;  // queue[head] is in start_send / continue_send
    MetaWriter send_meta;       // the meta of queue[head], alive while it is being sent
    bool header_in = false;     // a chunk's header has been read, its tensors not yet
    ChunkTag incoming_tag;      // and this is its tag
    uint64_t incoming_bytes = 0;
    bool abort_seen = false;  // this neighbour has stopped and told us why

    bool idle() const { return head == queue.size(); }
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
  int rank_on(Side side) const { return side == Side::kLeft ? left_rank() : right_rank(); }
  Connection& connection(Side side) const { return side == Side::kLeft ? *left_ : *right_; }
  Link& link(Side side) { return side == Side::kLeft ? left_link_ : right_link_; }

  // The progress loop: moves bytes both ways on both links until `want` holds; throws
  // CollectiveError naming the neighbour at fault. For kChunk, the chunk `tag` comes from `from`
  // into `into`.
  void progress(Want want, Side from, std::span<float> into, ChunkTag tag);
  // Writes queued frames to `side` as far as the socket takes them; returns whether a byte moved.
  // A lost neighbour is a CollectiveError naming it.
  bool pump_sends(Side side);
  // Reads what has arrived of the expected chunk; returns true once it is all in. Throws the
  // failure a kRingAbort carries, or CollectiveError for a chunk the ranks disagree on.
  bool pump_receive(Side from, std::span<float> into, ChunkTag tag);
  // Reads the next frame's opening from `side` if one has arrived, handling keepalives and
  // aborts; returns true once a chunk's header is in (Link::header_in).
  bool read_header(Side side);
  // Sleeps until a neighbour can move bytes, or `until`. Watches the link `reading` and every
  // other link that is not holding a chunk back for later, so that an abort is seen at once.
  void wait_for_io(const Side* reading, SteadyClock::time_point until);

  // Failure: records `message` (the first one wins), tells every neighbour but the one whose link
  // broke, then reads on until each of them has stopped too, and throws it as a CollectiveError.
  [[noreturn]] void fail(const std::string& message, std::optional<Side> broken);
  // "lost worker2: <what> (seen by worker3)", thrown through fail().
  [[noreturn]] void fail_lost(Side side, std::string_view what);
  void send_abort(Side side, const std::string& message);
  // A neighbour may still be sending to us; read on until its own abort arrives (every rank tells
  // every neighbour), its link closes, or timeout_ms, so that it learns the real culprit rather
  // than finding this rank gone.
  void drain(Side side);
  void throw_if_failed() const;
  std::string lost_message(int peer, std::string_view what) const;

  const TcpRingOptions options_;
  std::unique_ptr<Server> server_;     // accepts the left neighbour; null when size == 1
  std::unique_ptr<Connection> right_;  // we connected it
  Connection* left_ = nullptr;         // it connected to us; owned by server_'s handler
  Link left_link_;
  Link right_link_;
  std::exception_ptr failure_;  // the first failure, a CollectiveError

  std::mutex mutex_;  // for forming and closing the ring: left_, closing_, last_refusal_
  std::condition_variable membership_;
  bool closing_ = false;
  std::string last_refusal_;
};

}  // namespace dtrain
