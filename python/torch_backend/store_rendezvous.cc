// Keys under the group's prefix: "dtrain/secret" (rank 0's, when it made one) and
// "dtrain/address/<rank>" ("host:port").
#include "store_rendezvous.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "cluster/cluster_secret.h"
#include "cluster/cluster_spec.h"
#include "comm/local_address.h"

namespace dtrain::torch_backend {
namespace {

constexpr char kSecretKey[] = "dtrain/secret";

std::vector<uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

std::string text_of(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

std::string address_key(int rank) { return fmt::format("dtrain/address/{}", rank); }

// The host the store serves from, under however many prefixes; empty for a store without one.
std::string store_host(c10::intrusive_ptr<c10d::Store> store) {
  while (auto* prefixed = dynamic_cast<c10d::PrefixStore*>(store.get())) {
    store = prefixed->getUnderlyingStore();
  }
  if (auto* tcp = dynamic_cast<c10d::TCPStore*>(store.get())) return tcp->getHost();
  return "";
}

std::string group_secret(c10d::Store& store, int rank) {
  std::string secret = cluster_secret("", process_env());
  if (!secret.empty()) return secret;
  if (rank == 0) {
    secret = new_cluster_secret();
    store.set(kSecretKey, bytes_of(secret));
    return secret;
  }
  return text_of(store.get(kSecretKey));
}

}  // namespace

std::unique_ptr<RankGroup> join_through_store(const c10::intrusive_ptr<c10d::Store>& store,
                                              int rank, int world_size,
                                              std::chrono::milliseconds timeout) {
  RankGroupOptions options;
  options.rank = rank;
  options.world_size = world_size;
  options.timeout_ms =
      static_cast<int>(std::min<int64_t>(timeout.count(), std::numeric_limits<int>::max()));
  const std::string host = store_host(store);
  const std::string own_host = host.empty() ? "127.0.0.1" : local_address_toward(host);
  if (world_size > 1) options.secret = group_secret(*store, rank);
  return std::make_unique<RankGroup>(
      options, HostPort{own_host, 0}, [&](const HostPort& listening) {
        store->set(address_key(rank), bytes_of(listening.to_string()));
        std::vector<HostPort> ranks;
        for (int r = 0; r < world_size; ++r) {
          ranks.push_back(parse_host_port(fmt::format("the torch Store's {}", address_key(r)),
                                          text_of(store->get(address_key(r)))));
        }
        return ranks;
      });
}

}  // namespace dtrain::torch_backend
