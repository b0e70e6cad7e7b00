// RingLinks over comm/: each rank listens for its left neighbour and connects to its right one.
// Both ends authenticate with the cluster secret and check that they agree on the ring's size,
// their ranks and a fingerprint of what they run. Each connection carries frames both ways (the
// ring algorithms use it one way, halving-doubling both). The calling thread drives both
// connections without blocking on either (the progress loop of MPI implementations): while it
// waits for a chunk from one neighbour, queued chunks flow out, with no thread hand-offs on the
// hot path.
//
// Between ranks of one host (--transport auto, the default, or shm) a chunk does not cross the
// socket: the sender sends where it lies (kRingChunkRef), the receiver copies it straight out of
// the sender's memory (comm/peer_memory.h) and says so (kRingChunkRead), which is what wait_sent()
// then waits for. Those two announcements go through a page the two ranks share
// (comm/shared_mailbox.h) where the kernel lets them share one, so that a chunk's round trip costs
// no system call; a rank that sleeps is woken by a keepalive frame. Frames still carry everything
// else (keepalives, aborts, a closed connection), so failure detection is the same on both.
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
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/stop_request.h"
#include "collective/ring_links.h"
#include "comm/connection.h"
#include "comm/host_port.h"
#include "comm/meta_codec.h"
#include "comm/peer_memory.h"
#include "comm/server.h"
#include "comm/shared_mailbox.h"

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
  // How chunks reach a neighbour on this host (comm/peer_memory.h). Under kShm a neighbour whose
  // memory cannot be read, or that was started with --transport tcp, keeps the ring from forming.
  Transport transport = Transport::kAuto;
  // While connecting to the right neighbour: a stop request ends the wait (StopRequested), and
  // wait_report, if set, is told every wait_report_interval_ms that it goes on (connection.h).
  const StopRequest* stop = nullptr;
  std::function<void(const std::string&)> wait_report;
  int wait_report_interval_ms = 10'000;
};

// The spin that suits `ranks_here` ranks sharing this machine's cores. Retrying pays while every
// rank has a core of its own. Once they outnumber the cores, it steals more than it saves over TCP,
// whose every chunk is kernel work for the core; chunks that move through memory need only a short
// announcement, and there a sleep's wake-up costs more than the copy (4 ranks on 2 cores, 1 MiB:
// 0.55 ms spinning against 0.75 ms sleeping at once). Under Transport::kAuto the ring spins, even
// on the rare link that falls back to TCP.
int ring_spin_us(int ranks_here, Transport transport);

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

  // Whether chunks to and from the neighbour on `side` are copied out of the sender's memory
  // rather than sent over the socket. REQUIRES: connected.
  bool reads_memory(Side side) const { return link(side).by_reference; }
  // Whether the announcements of such chunks go through a shared page rather than frames.
  bool shares_mailbox(Side side) const { return link(side).mailbox != nullptr; }

 private:
  enum class Kind { kChunk, kKeepalive, kRead };
  struct Outgoing {
    std::span<const float> data;
    ChunkTag tag;
    Kind kind = Kind::kChunk;  // kRead: a kRingChunkRead for the oldest chunk read from that side
  };
  // A chunk a neighbour announced by reference and that has not been read yet.
  struct ChunkRef {
    ChunkTag tag;
    uint64_t address = 0;
    uint64_t bytes = 0;
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
    // The neighbour closed the connection between frames: normal once it has finished, a loss
    // only if we still wait on it (then `closed` says how it went).
    std::string closed;
    // Chunks move by reference on this link (set once when the ring forms), read from the memory
    // of process peer_pid; announced through `mailbox` when there is one, in frames otherwise.
    bool by_reference = false;
    int32_t peer_pid = 0;
    std::unique_ptr<SharedMailbox> mailbox;
    uint64_t acknowledged = 0;   // of our chunks, by the neighbour, as last read from the mailbox
    uint64_t unread = 0;         // chunks we sent by reference that the neighbour has not read
    std::vector<ChunkRef> refs;  // refs[ref_head..]: announced to us, not read yet
    size_t ref_head = 0;

    bool idle() const { return head == queue.size(); }
    // Nothing queued and nothing of ours still to be read: our memory is ours again.
    bool settled() const { return idle() && unread == 0; }
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
  // Once the left neighbour refused for good has been told, this rank's own connect and wait end
  // with final_refusal_.
  void give_up_forming();
  // The refusal that ended forming the ring for good, if it has.
  std::string final_refusal();
  std::string refusal_note();
  int left_rank() const;
  int right_rank() const;
  int rank_on(Side side) const { return side == Side::kLeft ? left_rank() : right_rank(); }
  Connection& connection(Side side) const { return side == Side::kLeft ? *left_ : *right_; }
  Link& link(Side side) { return side == Side::kLeft ? left_link_ : right_link_; }
  const Link& link(Side side) const { return side == Side::kLeft ? left_link_ : right_link_; }
  // Forming a by-reference link (ring_protocol.h), each rank reading the challenge it sent where
  // the other says it holds it. The connecting side: `right` holds `mine`, we hold `theirs`;
  // throws under kShm if the link stays on TCP. The listening side: returns "" once the link is
  // by reference, otherwise why not.
  void connect_by_reference(const MemoryOffer& right, const Challenge& mine,
                            const Challenge& theirs);
  std::string accept_by_reference(Connection& connection, const Challenge& mine);
  // The shared mailbox of a by-reference link: the connecting side creates it (null where the
  // system will not), the listening side maps it (null, with a note in the log, where it cannot).
  std::unique_ptr<SharedMailbox> create_mailbox() const;
  std::unique_ptr<SharedMailbox> attach_mailbox(const MemoryOffer& left, int32_t fd) const;
  std::string shm_failure(int peer_rank, std::string_view why) const;

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
  // A read from `side` failed: a neighbour that closed between frames is noted (Link::closed),
  // anything else fails the ring naming it.
  void lost_while_reading(Side side, const TransportError& error);
  // For a by-reference link: reads every frame that has arrived (announcements are queued, reads
  // counted, keepalives dropped, an abort thrown); returns whether a byte moved.
  bool read_announcements(Side side);
  // The mailbox's part of read_announcements and of pump_sends.
  bool read_mailbox(Side side);
  bool pump_mailbox(Side side);
  // A neighbour's counters in a mailbox make no sense (SharedMailbox throws a FrameError naming
  // it): fails the ring with that, telling both neighbours.
  [[noreturn]] void fail_corrupted(const FrameError& error);
  // pump_receive on a by-reference link: copies the next announced chunk out of the neighbour's
  // memory and queues the kRingChunkRead that frees it.
  bool receive_by_reference(Side from, std::span<float> into, ChunkTag tag);
  [[noreturn]] void fail_mismatch(Side from, ChunkTag got, uint64_t got_bytes, ChunkTag tag,
                                  uint64_t bytes);
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
  std::string left_failure_;  // the left neighbour could not join under --transport shm: why
  // A left neighbour refused for good (another ring size, order or fingerprint): no ring can form,
  // so this rank's own connect and wait end with it once the neighbour has been told.
  std::string final_refusal_;
};

}  // namespace dtrain
