// The TCP connector: a TcpRing made at listen(), connected and handed over at connect().
#include "collective/ring_connector.h"

#include <stdexcept>
#include <utility>

#include "base/cpu.h"
#include "collective/tcp_ring.h"

namespace dtrain {
namespace {

class TcpRingConnector final : public RingConnector {
 public:
  void listen(const RingOptions& options) override {
    if (ring_) throw std::logic_error("RingConnector::listen called twice");
    right_ = options.right;
    ring_ = std::make_unique<TcpRing>(options);
  }

  std::unique_ptr<RingLinks> connect() override {
    if (!ring_) throw std::logic_error("RingConnector::connect without listen, or called twice");
    ring_->connect(right_);
    return std::move(ring_);
  }

  // The ring half formed keeps its connections until this connector goes, so the neighbours it
  // reached hear the reason rather than a closed connection.
  void abort(std::string_view reason) override {
    if (ring_) ring_->abort(reason);
  }

 private:
  HostPort right_;
  std::unique_ptr<TcpRing> ring_;  // from listen() until connect() succeeds
};

}  // namespace

int ring_spin_us(int ranks_here, Transport transport) {
  return ranks_here <= available_cores() || transport != Transport::kTcp ? 50 : 0;
}

std::unique_ptr<RingConnector> tcp_ring_connector() { return std::make_unique<TcpRingConnector>(); }

std::unique_ptr<RingLinks> connect_ring(const RingOptions& options) {
  const std::unique_ptr<RingConnector> connector = tcp_ring_connector();
  connector->listen(options);
  return connector->connect();
}

}  // namespace dtrain
