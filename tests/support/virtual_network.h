// Hosts of their own for integration tests: each host a network namespace with one address on a
// bridge that lives in a namespace of its own (the switch), so that tasks talk over veth links as
// over a LAN, and the faults a real network has can be put on one host's link: a slow link (tbf),
// random loss and a cut (nftables drops, counted). Needs root, iproute2 and nftables; the kernel
// here has no sch_netem, so delay comes from a slow link's queue rather than netem.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtrain::testing {

// Thread-safety: one test thread drives it.
class VirtualNetwork {
 public:
  // Why these tests cannot run here (not root, a tool missing, namespaces refused), or nullopt
  // when they can.
  static std::optional<std::string> unavailable();

  // Creates the switch and `hosts` hosts, host i at address(i), and an empty fault table on each.
  // Throws std::runtime_error naming the command that failed (and removes what it had made).
  explicit VirtualNetwork(int hosts);
  // Deletes every namespace it made (their links go with them). Processes still inside keep
  // theirs until they exit, so tests stop their tasks first.
  ~VirtualNetwork();
  VirtualNetwork(const VirtualNetwork&) = delete;
  VirtualNetwork& operator=(const VirtualNetwork&) = delete;

  // "10.77.0.<host + 1>".
  std::string address(int host) const;
  // The command that runs a program on `host` and becomes it: `ip netns exec <namespace>`.
  std::vector<std::string> run_on(int host) const;
  // Sets a per-namespace kernel setting on `host` alone ("net.ipv4.tcp_congestion_control",
  // "reno"), so that a test makes the host it needs instead of depending on the machine's.
  void set_sysctl(int host, const std::string& name, const std::string& value);

  // Both directions of host's link to the switch carry at most `kbit` kbit/s; what is over waits
  // in the queue (up to 100 ms of it), so every frame is delayed in proportion to the traffic.
  void slow_link(int host, int kbit);
  // Drops packets between host and peer at random, `per_mille` of them in each direction.
  void lose(int host, int peer, int per_mille);
  // Drops every packet between host and peer, both ways: no reset, no answer, as a failed switch
  // port or a firewall would. Connections see silence, and connects time out.
  void cut(int host, int peer);
  // Removes host's loss and cut rules (a slow link stays).
  void heal(int host);
  // Packets that host's loss and cut rules have dropped so far.
  uint64_t dropped(int host) const;

 private:
  // Runs a command; throws std::runtime_error with its output unless it exits 0.
  static std::string run(const std::vector<std::string>& argv);
  std::string run_in(int host, std::vector<std::string> argv) const;
  // Adds a rule to host's fault chains for each direction of its traffic with peer: `match` is
  // appended to "ip daddr <peer>" on the way out and "ip saddr <peer>" on the way in.
  void drop_between(int host, int peer, const std::string& match);
  void remove_all();

  std::string prefix_;                // of every namespace name: "dtn<pid>-<n>"
  std::string switch_;                // the switch's namespace
  std::vector<std::string> hosts_;    // each host's namespace
  std::vector<std::string> created_;  // every namespace made so far, for remove_all
};

}  // namespace dtrain::testing
