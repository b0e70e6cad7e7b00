// What this process's connections have moved and refused, by peer, for the metrics endpoint
// (dtrain_bytes_sent_total, dtrain_bytes_received_total, dtrain_frames_rejected_total): counted
// by every Connection as frames go out and come in, kept for the process's life so that a
// counter never goes down when a connection closes. What peers that proved nothing can add is
// bounded: refusals from more sources than a few are counted together.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace dtrain {

// One peer's bytes, whatever the path (by value over the socket, or copied by reference); frames
// whole: header, meta and tensors.
struct PeerTraffic {
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> received{0};
};

// Thread-safe.
class TransportCounters {
 public:
  static TransportCounters& process();

  // The counters of the peer named `peer` ("worker1", "ps0": its proved identity), made at its
  // first connection and never freed: a connection keeps the pointer.
  PeerTraffic& peer(const std::string& peer);
  // A frame or handshake refused: from `peer` as above when it `proved` its name, or else the
  // address of one that proved nothing; `reason` one of "authentication", "bad_tag", "bad_crc",
  // "too_large", "malformed". The first kMaxRefusingPeers peers of each kind are counted by name;
  // the refusals of any beyond them under kOtherPeers, so that sources without the secret, as
  // many as an attacker has addresses, cost a bounded page and memory (each source its own
  // series: 60,000 of them made a 4.9 MB page).
  void rejected(const std::string& peer, bool proved, const std::string& reason);
  static constexpr size_t kMaxRefusingPeers = 16;
  static constexpr const char* kOtherPeers = "other";

  struct Traffic {
    std::string peer;
    uint64_t sent = 0;
    uint64_t received = 0;
  };
  std::vector<Traffic> traffic() const;
  struct Rejections {
    std::string peer;
    std::string reason;
    uint64_t frames = 0;
  };
  std::vector<Rejections> rejections() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<PeerTraffic>> peers_;           // guarded by mutex_
  std::map<std::pair<std::string, std::string>, uint64_t> rejections_;  // guarded by mutex_
  // The peers counted by name, by kind; guarded by mutex_.
  std::set<std::string> refusing_names_;
  std::set<std::string> refusing_addresses_;
};

// The label a peer's identity gets: "worker 1" -> "worker1"; "" (a tool) -> "tool".
std::string peer_label(const std::string& identity);
// Why a connection failed, as TransportCounters::rejected's reason; "" for a failure that is not
// a refusal (a closed or timed-out connection).
std::string rejection_reason(const std::exception& error);

}  // namespace dtrain
