// A forwarder on loopback that rewrites what it carries, as an attacker on the network path who
// does not hold the cluster secret would: it passes the handshake through, then negates the
// gradient of every push a worker sends and recomputes the frame's CRC32C. Tests put it
// between a worker and a ps to show that authenticated frames catch it.
#pragma once

#include <atomic>
#include <cstdint>
#include <stop_token>
#include <thread>

namespace dtrain::testing {

class TamperRelay {
 public:
  // Listens on a free loopback port and forwards each connection to `target`.
  explicit TamperRelay(uint16_t target);
  ~TamperRelay();  // stops accepting and joins every connection's thread
  TamperRelay(const TamperRelay&) = delete;
  TamperRelay& operator=(const TamperRelay&) = delete;

  uint16_t port() const { return port_; }
  int pushes_rewritten() const { return rewritten_; }

 private:
  void accept_loop(std::stop_token stop);
  void pump(int client, std::stop_token stop);

  uint16_t target_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<int> rewritten_ = 0;
  std::jthread acceptor_;  // last: it uses everything above
};

}  // namespace dtrain::testing
