// Rank 0 runs a Server whose handler reads one REGISTER frame per connection into a Registry, then
// waits, on the connection's own thread, until the registry is complete or has failed, and answers
// with the cluster or with the failure. Rank 0 registers itself directly and waits the same way;
// it stops the server only once every registered rank has been answered, so that every rank ends
// with the same message.
#include "cluster/rendezvous.h"

#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/error.h"
#include "base/peer_text.h"
#include "cluster/bind_address.h"
#include "comm/connect.h"
#include "comm/connection.h"
#include "comm/frame_format.h"
#include "comm/server.h"

namespace dtrain {
namespace {

using nlohmann::json;

// The rendezvous's own frames; its server serves nothing else.
constexpr uint16_t kTypeRegister = frame_format::kFirstUserType;  // {"rank","world_size","address"}
constexpr uint16_t kTypeCluster = kTypeRegister + 1;              // {"ranks": ["host:port", ...]}
constexpr uint16_t kTypeFailed = kTypeRegister + 2;               // {"error": "..."}

bool carries_no_tensors(uint16_t /*type*/) { return false; }

std::span<const std::byte> bytes_of(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

// The ranks registered so far, and the outcome once there is one. Thread-safe.
class Registry {
 public:
  Registry(int world_size, std::string where) : ranks_(world_size), where_(std::move(where)) {}

  // Records `rank` at `address`, reached from `from`; a second claim of a rank, or another world
  // size, fails the whole rendezvous.
  void add(int rank, int world_size, const HostPort& address, const std::string& from) {
    std::lock_guard lock(mutex_);
    ++claims_;
    if (!error_.empty()) return;
    if (world_size != static_cast<int>(ranks_.size())) {
      fail_locked(
          fmt::format("rank {} (from {}) was started for a world of {} tasks, rank 0 for {}", rank,
                      from, world_size, ranks_.size()));
    } else if (rank < 0 || rank >= world_size) {
      fail_locked(
          fmt::format("{} registered rank {}, outside the world of {}", from, rank, ranks_.size()));
    } else if (ranks_[rank]) {
      fail_locked(
          fmt::format("rank {} was claimed twice: from {} and from {}; give every task "
                      "its own rank",
                      rank, from_[rank], from));
    } else {
      ranks_[rank] = address;
      from_[rank] = from;
      ++registered_;
    }
    changed_.notify_all();
  }

  void fail(const std::string& error) {
    std::lock_guard lock(mutex_);
    fail_locked(error);
    changed_.notify_all();
  }

  // Waits until every rank has registered or the rendezvous has failed, or until `until`; returns
  // whether it is over.
  bool wait(SteadyClock::time_point until) {
    std::unique_lock lock(mutex_);
    return changed_.wait_until(lock, until, [&] { return over_locked(); });
  }

  // REQUIRES: over. The failure, or "" with every rank's address.
  std::string error() const {
    std::lock_guard lock(mutex_);
    return error_;
  }
  std::vector<HostPort> ranks() const {
    std::lock_guard lock(mutex_);
    std::vector<HostPort> all;
    for (const auto& r : ranks_) all.push_back(r.value_or(HostPort{}));
    return all;
  }
  std::string missing() const {
    std::lock_guard lock(mutex_);
    std::vector<int> missing;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (!ranks_[r]) missing.push_back(static_cast<int>(r));
    }
    return fmt::format("{}", fmt::join(missing, ", "));
  }

  // Answers are counted so that rank 0 stops its server only after the last one is out.
  void answered() {
    std::lock_guard lock(mutex_);
    ++answered_;
    changed_.notify_all();
  }
  bool wait_answered(int n, SteadyClock::time_point until) {
    std::unique_lock lock(mutex_);
    return changed_.wait_until(lock, until, [&] { return answered_ >= n; });
  }
  // Registrations received, rank 0's own included, whether or not they were accepted.
  int claims() const {
    std::lock_guard lock(mutex_);
    return claims_;
  }

 private:
  bool over_locked() const {
    return !error_.empty() || registered_ == static_cast<int>(ranks_.size());
  }
  void fail_locked(const std::string& error) {
    if (error_.empty()) error_ = fmt::format("rendezvous at {}: {}", where_, error);
  }

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::optional<HostPort>> ranks_;
  std::map<int, std::string> from_;
  const std::string where_;
  int registered_ = 0;
  int claims_ = 0;
  int answered_ = 0;
  std::string error_;
};

void answer(Connection& connection, const Registry& registry, uint16_t coordinator_port) {
  const std::string error = registry.error();
  json reply;
  if (error.empty()) {
    reply["ranks"] = json::array();
    for (const HostPort& r : registry.ranks()) reply["ranks"].push_back(r.to_string());
    if (coordinator_port != 0) reply["coordinator"] = coordinator_port;
  } else {
    reply["error"] = error;
  }
  connection.send(error.empty() ? kTypeCluster : kTypeFailed, 0, bytes_of(reply.dump()), {});
}

// Rank 0's side of one other rank's connection.
void serve_registration(Connection& connection, Registry& registry, SteadyClock::time_point until,
                        uint16_t coordinator_port) {
  const Connection::Incoming in = connection.receive();
  if (in.type != kTypeRegister || in.tensor_bytes != 0) {
    throw FrameError(
        fmt::format("rendezvous: unexpected frame type {} from {}", in.type, connection.address()));
  }
  int rank = -1, world_size = -1;
  std::string address;
  try {
    const json meta = json::parse(in.meta.begin(), in.meta.end());
    rank = meta.at("rank").get<int>();
    world_size = meta.at("world_size").get<int>();
    address = meta.at("address").get<std::string>();
  } catch (const json::exception& error) {
    throw FrameError(fmt::format("rendezvous: a malformed registration from {}: {}",
                                 connection.address(), peer_text(error.what())));
  }
  // Escaped: a valid address is printable, and one that is not is echoed in the error.
  registry.add(rank, world_size,
               parse_host_port("rendezvous: registered address", peer_text(address)),
               connection.address());
  // Rank 0 fails the registry at `until` itself; the margin only guards against its never doing so.
  if (!registry.wait(until + std::chrono::seconds(5))) registry.fail("rank 0 stopped waiting");
  answer(connection, registry, coordinator_port);
  registry.answered();
}

std::vector<HostPort> serve_rendezvous(const RendezvousOptions& o) {
  const auto until = SteadyClock::now() + std::chrono::milliseconds(o.timeout_ms);
  const std::string where = o.address.to_string();
  Registry registry(o.world_size, where);
  ServerOptions server_options;
  server_options.bind_host = bind_address_for(o.address, o.bind).host;
  server_options.port = o.address.port;
  server_options.secret = o.secret;
  server_options.connection.authenticate_frames = o.authenticate_frames;
  server_options.connection.tcp_congestion = o.tcp_congestion;
  server_options.connection.type_carries_tensors = carries_no_tensors;
  Server server(server_options, [&](Connection& connection) {
    serve_registration(connection, registry, until, o.coordinator_port);
  });
  // Rank 0's task listens where its rendezvous does: at the address its name resolved to here
  // (so that ranks on this host, which reach it there, count as this host's), or under its name
  // when that is another machine's view of this one.
  const std::string& bound = server_options.bind_host;
  const std::string own_host = bound == "0.0.0.0" || bound == "::" ? o.address.host : bound;
  try {
    registry.add(0, o.world_size, HostPort{own_host, free_port_on(bound)}, "rank 0 itself");
  } catch (const Error& error) {
    registry.fail(error.what());  // so that the server's handlers answer, and it can stop
  }
  if (!registry.wait(until)) {
    const ServerStats stats = server.stats();
    registry.fail(
        fmt::format("rank(s) {} did not register within {} s (--peer_timeout){}",
                    registry.missing(), o.timeout_ms / 1000,
                    stats.rejected > 0 ? "; meanwhile " + describe_rejections(stats) : ""));
  }
  // Every rank that registered, or tried to, is told before the server closes its connection.
  registry.wait_answered(registry.claims() - 1, SteadyClock::now() + std::chrono::seconds(10));
  server.stop();
  if (const std::string error = registry.error(); !error.empty()) throw Error(error);
  return registry.ranks();
}

std::vector<HostPort> join_rendezvous(const RendezvousOptions& o, uint16_t* coordinator_port) {
  ConnectionOptions options;
  options.task_name = fmt::format("the rendezvous ({})", o.source);
  options.connect_timeout_ms = o.timeout_ms;
  options.idle_timeout_ms = o.timeout_ms + 10'000;  // rank 0 answers by its own deadline
  options.authenticate_frames = o.authenticate_frames;
  options.tcp_congestion = o.tcp_congestion;
  options.type_carries_tensors = carries_no_tensors;
  const std::unique_ptr<Connection> connection =
      connect(o.address.host, o.address.port, o.secret, options);
  const std::string host = connection->local_host();
  const HostPort own{host, free_port_on(host)};
  const json registration = {
      {"rank", o.rank}, {"world_size", o.world_size}, {"address", own.to_string()}};
  connection->send(kTypeRegister, 0, bytes_of(registration.dump()), {});
  const Connection::Incoming in = connection->receive();
  if (in.type != kTypeCluster && in.type != kTypeFailed) {
    throw FrameError(
        fmt::format("rendezvous at {}: unexpected frame type {}", o.address.to_string(), in.type));
  }
  std::vector<HostPort> ranks;
  try {
    const json reply = json::parse(in.meta.begin(), in.meta.end());
    if (in.type == kTypeFailed) throw Error(peer_text(reply.at("error").get<std::string>()));
    for (const json& r : reply.at("ranks")) {
      ranks.push_back(
          parse_host_port("rendezvous: rank 0's answer", peer_text(r.get<std::string>())));
    }
    if (coordinator_port != nullptr) *coordinator_port = reply.value("coordinator", uint16_t{0});
  } catch (const json::exception& error) {
    throw FrameError(fmt::format("rendezvous at {}: a malformed answer: {}", o.address.to_string(),
                                 peer_text(error.what())));
  }
  if (static_cast<int>(ranks.size()) != o.world_size) {
    throw FrameError(fmt::format("rendezvous at {}: rank 0 answered with {} ranks, not {}",
                                 o.address.to_string(), ranks.size(), o.world_size));
  }
  return ranks;
}

}  // namespace

std::vector<HostPort> rendezvous(const RendezvousOptions& options, uint16_t* coordinator_port) {
  if (options.rank != 0) return join_rendezvous(options, coordinator_port);
  if (coordinator_port != nullptr) *coordinator_port = options.coordinator_port;
  return serve_rendezvous(options);
}

ClusterConfig cluster_of_ranks(const std::vector<HostPort>& ranks, int rank, int ps) {
  ClusterSpec::JobMap jobs;
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    jobs[std::string(r < ps ? kPsJob : kWorkerJob)].push_back(ranks[r]);
  }
  ClusterConfig config;
  config.cluster = ClusterSpec(std::move(jobs));
  config.task =
      rank < ps ? TaskId{std::string(kPsJob), rank} : TaskId{std::string(kWorkerJob), rank - ps};
  validate_cluster_config(config, "the rendezvous");
  return config;
}

// (It is released meanwhile; a process that takes it in between makes the task fail to listen,
// loudly.)
uint16_t free_port_on(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), "0", &hints, &found) != 0 || found == nullptr) {
    throw TransportError(fmt::format("rendezvous: '{}' is not an address of this host", host));
  }
  const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  const bool ok = fd >= 0 && ::bind(fd, found->ai_addr, found->ai_addrlen) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) == 0;
  const std::string why = std::strerror(errno);
  ::freeaddrinfo(found);
  if (fd >= 0) ::close(fd);
  if (!ok) throw TransportError(fmt::format("rendezvous: no free port on {}: {}", host, why));
  return ntohs(bound.ss_family == AF_INET
                   ? reinterpret_cast<const sockaddr_in*>(&bound)->sin_port
                   : reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port);
}

int ranks_on_host_of(const std::vector<HostPort>& ranks, int rank) {
  return static_cast<int>(std::count_if(
      ranks.begin(), ranks.end(), [&](const HostPort& r) { return r.host == ranks[rank].host; }));
}

}  // namespace dtrain
