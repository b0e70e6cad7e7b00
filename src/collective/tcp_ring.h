// RingLinks over comm/: each rank listens for its left neighbour and connects to its right one.
// Both ends authenticate with the cluster secret and check that they agree on the ring's size,
// their ranks and a fingerprint of what they run. A sender thread drains the send queue, so that
// sends overlap the caller's receives and reductions.
//
// Failure: the first rank to find a neighbour lost (connection closed) or stuck (nothing for
// timeout_ms) stops with a CollectiveError naming it, and sends an abort with that message to its
// right; each rank passes it on, so every rank stops with the same message instead of waiting.
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
#include <thread>
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
  // How long to wait for the ring to form, and for any message once it has (--collective_timeout).
  int timeout_ms = 60'000;
  std::string job = "worker";  // ranks are named "<job><rank>" in messages
};

// Thread-safety: one thread makes the RingLinks calls (the Communicator's); abort() may be called
// from any thread.
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

  // "worker3"
  std::string rank_name(int rank) const;

 private:
  struct Outgoing {
    std::span<const float> data;
    ChunkTag tag;
  };

  // The server's handler for a connection: checks its hello, adopts it as the left link (or
  // refuses it) and holds it open until the ring is destroyed.
  void serve_left(Connection& connection);
  std::string refusal_for(int size, int rank, uint64_t fingerprint, std::string_view peer) const;
  void wait_for_left(SteadyClock::time_point deadline);
  int left_rank() const;
  int right_rank() const;
  void send_loop();
  void send_frame(const Outgoing& item);
  void send_abort_frame(const std::string& reason);
  // Records `message` as the ring's failure and throws the first failure recorded.
  [[noreturn]] void fail(const std::string& message);
  // Keeps the first failure, drops the queue, and queues an abort to the right unless the right
  // link is what broke. REQUIRES: mutex_ held.
  void record_failure(const std::string& message, bool right_broken);
  void throw_if_failed() const;  // REQUIRES: mutex_ held

  const TcpRingOptions options_;
  std::unique_ptr<Server> server_;     // accepts the left neighbour; null when size == 1
  std::unique_ptr<Connection> right_;  // we send on it
  Connection* left_ = nullptr;         // we receive on it; owned by server_; set under mutex_
  MetaWriter send_meta_;               // the sender thread's

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Outgoing> queue_;       // guarded by mutex_; queue_[head_..] still to send
  size_t head_ = 0;                   // guarded by mutex_
  bool sending_data_ = false;         // guarded by mutex_; the sender is reading a chunk
  std::optional<std::string> abort_;  // guarded by mutex_; an abort frame still to send
  std::exception_ptr failure_;        // guarded by mutex_; the first failure, CollectiveError
  bool closing_ = false;              // guarded by mutex_; the destructor has begun
  std::string last_refusal_;          // guarded by mutex_
  std::jthread sender_;               // started by connect()
};

}  // namespace dtrain
