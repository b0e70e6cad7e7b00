// A TCP forwarder on loopback that cuts its connections on purpose: tests put it between a worker
// and a ps so that real connections break at chosen moments, with both processes alive.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <stop_token>
#include <thread>

namespace dtrain::testing {

class CutProxy {
 public:
  // Listens on a free loopback port and forwards each connection to `target`. On each
  // connection, once more than next_cut() bytes have come back from the target, the bytes that
  // crossed that mark are dropped and both sides closed; next_cut() is asked again for each
  // connection, and returns 0 for "never".
  CutProxy(uint16_t target, std::function<uint64_t()> next_cut);
  ~CutProxy();  // stops accepting and joins every connection's thread
  CutProxy(const CutProxy&) = delete;
  CutProxy& operator=(const CutProxy&) = delete;

  uint16_t port() const { return port_; }
  int cuts() const { return cuts_; }

 private:
  void accept_loop(std::stop_token stop);
  void pump(int client, uint64_t cut_at, std::stop_token stop);

  uint16_t target_;
  std::function<uint64_t()> next_cut_;  // called on the accepting thread only
  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<int> cuts_ = 0;
  std::jthread acceptor_;  // last: it uses everything above
};

}  // namespace dtrain::testing
