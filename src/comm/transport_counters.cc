// The process's transport counters, and how a failure is named as a refusal.
#include "comm/transport_counters.h"

#include <string_view>

#include "base/error.h"

namespace dtrain {

TransportCounters& TransportCounters::process() {
  static TransportCounters counters;
  return counters;
}

PeerTraffic& TransportCounters::peer(const std::string& peer) {
  std::lock_guard lock(mutex_);
  std::unique_ptr<PeerTraffic>& traffic = peers_[peer];
  if (!traffic) traffic = std::make_unique<PeerTraffic>();
  return *traffic;
}

void TransportCounters::rejected(const std::string& peer, bool proved, const std::string& reason) {
  std::lock_guard lock(mutex_);
  std::set<std::string>& known = proved ? refusing_names_ : refusing_addresses_;
  if (!known.contains(peer)) {
    if (known.size() >= kMaxRefusingPeers) {
      ++rejections_[{kOtherPeers, reason}];
      return;
    }
    known.insert(peer);
  }
  ++rejections_[{peer, reason}];
}

std::vector<TransportCounters::Traffic> TransportCounters::traffic() const {
  std::lock_guard lock(mutex_);
  std::vector<Traffic> all;
  for (const auto& [peer, traffic] : peers_) {
    all.push_back({peer, traffic->sent.load(std::memory_order_relaxed),
                   traffic->received.load(std::memory_order_relaxed)});
  }
  return all;
}

std::vector<TransportCounters::Rejections> TransportCounters::rejections() const {
  std::lock_guard lock(mutex_);
  std::vector<Rejections> all;
  for (const auto& [key, frames] : rejections_) all.push_back({key.first, key.second, frames});
  return all;
}

std::string peer_label(const std::string& identity) {
  if (identity.empty()) return "tool";
  std::string label;
  for (const char c : identity) {
    if (c != ' ') label += c;
  }
  return label;
}

std::string rejection_reason(const std::exception& error) {
  if (dynamic_cast<const AuthError*>(&error) != nullptr) return "authentication";
  if (dynamic_cast<const FrameError*>(&error) == nullptr) return "";
  const std::string_view what = error.what();
  if (what.find("failed authentication") != std::string_view::npos) return "bad_tag";
  if (what.find("CRC") != std::string_view::npos) return "bad_crc";
  if (what.find("limit") != std::string_view::npos) return "too_large";
  return "malformed";
}

}  // namespace dtrain
