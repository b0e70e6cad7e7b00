// A TCP forwarder on loopback that tests put between two tasks: each connection it accepts goes
// on to `target`, and what crosses passes through that connection's Filter, which may rewrite it,
// hold part of it back, or cut the connection (tests/support/cut_proxy.h, tamper_relay.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stop_token>
#include <thread>
#include <vector>

namespace dtrain::testing {

class Forwarder {
 public:
  // One connection's view of its bytes. Each call gets what just arrived and appends what to send
  // on to `out`; false cuts the connection (both sides closed, `in` dropped).
  class Filter {
   public:
    virtual ~Filter() = default;
    virtual bool from_client(std::span<const std::byte> in, std::vector<std::byte>& out) = 0;
    virtual bool from_server(std::span<const std::byte> in, std::vector<std::byte>& out) = 0;
  };

  // Listens on a free loopback port; make_filter is called on the accepting thread for each
  // connection.
  Forwarder(uint16_t target, std::function<std::unique_ptr<Filter>()> make_filter);
  ~Forwarder();  // stops accepting and joins every connection's thread
  Forwarder(const Forwarder&) = delete;
  Forwarder& operator=(const Forwarder&) = delete;

  uint16_t port() const { return port_; }

 private:
  void accept_loop(std::stop_token stop);
  void pump(int client, std::unique_ptr<Filter> filter, std::stop_token stop);

  uint16_t target_;
  std::function<std::unique_ptr<Filter>()> make_filter_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::jthread acceptor_;  // last: it uses everything above
};

}  // namespace dtrain::testing
