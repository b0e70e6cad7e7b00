// VirtualNetwork: iproute2 for namespaces, the bridge and the veth links, tc's tbf for a slow
// link, and one nftables table per host ("dtrain_faults", with a named counter every drop rule
// counts into) for loss and cuts.
#include "support/virtual_network.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "support/process.h"
#include "support/text_match.h"

namespace dtrain::testing {
namespace {

constexpr std::string_view kNamePrefix = "dtn";
constexpr std::string_view kFaultTable = "dtrain_faults";

// The full path of a system tool: on PATH, or in the sbin folders a non-login root shell may
// leave out of it. "" if none.
std::string find_tool(const std::string& name) {
  std::string dirs = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
  dirs += ":/usr/sbin:/sbin";
  size_t begin = 0;
  while (begin <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', begin), dirs.size());
    const std::filesystem::path candidate =
        std::filesystem::path(dirs.substr(begin, end - begin)) / name;
    if (end > begin && ::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    begin = end + 1;
  }
  return "";
}

std::string tool(const std::string& name) {
  std::string path = find_tool(name);
  if (path.empty()) throw std::runtime_error(name + " not found on PATH, /usr/sbin or /sbin");
  return path;
}

// Namespaces left by a test process that was killed before its destructor ran: their names
// carry its pid.
void remove_stale_namespaces() {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/run/netns", error)) {
    const std::string name = entry.path().filename().string();
    const auto match = first_match(name, R"(^dtn([0-9]+)-)");
    if (!match) continue;
    const pid_t pid = static_cast<pid_t>(std::stol((*match)[1]));
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    run_command({tool("ip"), "netns", "del", name});
  }
}

}  // namespace

std::optional<std::string> VirtualNetwork::unavailable() {
  if (::geteuid() != 0) {
    return "not root: network namespaces, links and firewall rules need root (run the suite as "
           "root to include these tests)";
  }
  for (const char* name : {"ip", "tc", "nft"}) {
    if (find_tool(name).empty()) {
      return fmt::format(
          "{} not found (Debian packages iproute2 and nftables; scripts/setup.sh "
          "installs them)",
          name);
    }
  }
  const std::string probe = fmt::format("{}{}-probe", kNamePrefix, ::getpid());
  const ProcessResult added = run_command({tool("ip"), "netns", "add", probe});
  if (added.exit_code != 0) {
    return fmt::format(
        "ip netns add failed, so this machine does not allow network namespaces "
        "here: {}",
        added.err);
  }
  run_command({tool("ip"), "netns", "del", probe});
  return std::nullopt;
}

std::string VirtualNetwork::run(const std::vector<std::string>& argv) {
  const ProcessResult result = run_command(argv);
  if (result.exit_code != 0) {
    std::string command;
    for (const std::string& arg : argv) command += (command.empty() ? "" : " ") + arg;
    throw std::runtime_error(fmt::format("`{}` failed (exit code {}, signal {}): {}{}", command,
                                         result.exit_code, result.signal, result.out, result.err));
  }
  return result.out;
}

std::string VirtualNetwork::run_in(int host, std::vector<std::string> argv) const {
  argv[0] = tool(argv[0]);
  std::vector<std::string> command = run_on(host);
  command.insert(command.end(), argv.begin(), argv.end());
  return run(command);
}

VirtualNetwork::VirtualNetwork(int hosts) {
  static std::atomic<int> networks = 0;
  prefix_ = fmt::format("{}{}-{}", kNamePrefix, ::getpid(), networks++);
  switch_ = prefix_ + "-sw";
  const std::string ip = tool("ip");
  try {
    remove_stale_namespaces();
    run({ip, "netns", "add", switch_});
    created_.push_back(switch_);
    run({ip, "-n", switch_, "link", "add", "br0", "type", "bridge"});
    run({ip, "-n", switch_, "link", "set", "br0", "up"});
    for (int i = 0; i < hosts; ++i) {
      const std::string ns = fmt::format("{}-h{}", prefix_, i);
      const std::string port = fmt::format("h{}", i);
      run({ip, "netns", "add", ns});
      created_.push_back(ns);
      hosts_.push_back(ns);
      // Both ends are made inside the namespaces, so no name is ever taken on the machine itself.
      run({ip, "-n", switch_, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns",
           ns});
      run({ip, "-n", switch_, "link", "set", port, "master", "br0", "up"});
      run({ip, "-n", ns, "link", "set", "lo", "up"});
      run({ip, "-n", ns, "addr", "add", address(i) + "/24", "dev", "eth0"});
      run({ip, "-n", ns, "link", "set", "eth0", "up"});
      const std::string table(kFaultTable);
      run_in(i, {"nft", "add", "table", "inet", table});
      run_in(i, {"nft", "add", "counter", "inet", table, "dropped"});
      run_in(i, {"nft", "add", "chain", "inet", table, "out",
                 "{ type filter hook output priority 0 ; }"});
      run_in(i, {"nft", "add", "chain", "inet", table, "in",
                 "{ type filter hook input priority 0 ; }"});
    }
  } catch (...) {
    remove_all();
    throw;
  }
}

VirtualNetwork::~VirtualNetwork() { remove_all(); }

void VirtualNetwork::remove_all() {
  for (auto it = created_.rbegin(); it != created_.rend(); ++it)
    run_command({tool("ip"), "netns", "del", *it});
  created_.clear();
}

std::string VirtualNetwork::address(int host) const { return fmt::format("10.77.0.{}", host + 1); }

std::vector<std::string> VirtualNetwork::run_on(int host) const {
  return {tool("ip"), "netns", "exec", hosts_.at(static_cast<size_t>(host))};
}

void VirtualNetwork::set_sysctl(int host, const std::string& name, const std::string& value) {
  run_in(host, {"sysctl", "-q", "-w", name + "=" + value});
}

void VirtualNetwork::slow_link(int host, int kbit) {
  // Each side shapes what it sends: the host towards the switch, the switch's port towards it.
  const std::vector<std::string> tbf = {"root",  "tbf",    "rate",    fmt::format("{}kbit", kbit),
                                        "burst", "32kbit", "latency", "100ms"};
  std::vector<std::string> on_host = {"tc", "qdisc", "add", "dev", "eth0"};
  on_host.insert(on_host.end(), tbf.begin(), tbf.end());
  run_in(host, on_host);
  std::vector<std::string> on_switch = {tool("ip"), "netns",    "exec",
                                        switch_,    tool("tc"), "qdisc",
                                        "add",      "dev",      fmt::format("h{}", host)};
  on_switch.insert(on_switch.end(), tbf.begin(), tbf.end());
  run(on_switch);
}

void VirtualNetwork::drop_between(int host, int peer, const std::string& match) {
  const std::string table(kFaultTable);
  for (const auto& [chain, direction] : {std::pair{"out", "daddr"}, std::pair{"in", "saddr"}}) {
    std::vector<std::string> rule = {"nft", "add", "rule",    "inet",       table,
                                     chain, "ip",  direction, address(peer)};
    if (!match.empty()) rule.push_back(match);
    rule.insert(rule.end(), {"counter", "name", "dropped", "drop"});
    run_in(host, rule);
  }
}

void VirtualNetwork::lose(int host, int peer, int per_mille) {
  drop_between(host, peer, fmt::format("numgen random mod 1000 < {}", per_mille));
}

void VirtualNetwork::cut(int host, int peer) { drop_between(host, peer, ""); }

void VirtualNetwork::heal(int host) {
  for (const char* chain : {"out", "in"})
    run_in(host, {"nft", "flush", "chain", "inet", std::string(kFaultTable), chain});
}

uint64_t VirtualNetwork::dropped(int host) const {
  const std::string listing =
      run_in(host, {"nft", "list", "counter", "inet", std::string(kFaultTable), "dropped"});
  const auto match = first_match(listing, R"(packets ([0-9]+))");
  if (!match) throw std::runtime_error("no packet count in: " + listing);
  return std::stoull((*match)[1]);
}

}  // namespace dtrain::testing
