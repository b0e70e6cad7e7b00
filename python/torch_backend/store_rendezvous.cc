// Keys under the group's prefix: "dtrain/address/<rank>" ("host:port"), and without DTRAIN_SECRET
// those of the secret's agreement (cluster/store_secret.h): "dtrain/key/<rank>" and
// "dtrain/sealed/<rank>".
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
#include "cluster/store_secret.h"
#include "comm/local_address.h"

namespace dtrain::torch_backend {
namespace {

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

// torch's Store as the agreement's: its get waits for the key within the store's timeout.
class TorchStore : public SharedStore {
 public:
  explicit TorchStore(c10d::Store& store) : store_(store) {}
  void set(const std::string& key, const std::string& value) override {
    store_.set(key, bytes_of(value));
  }
  std::string get(const std::string& key) override { return text_of(store_.get(key)); }

 private:
  c10d::Store& store_;
};

// DTRAIN_SECRET where set; else one agreed through the store, which never holds it: torch's
// TCPStore answers anyone who reaches MASTER_PORT, on every interface.
std::string group_secret(c10d::Store& store, int rank, int world_size) {
  std::string secret = cluster_secret("", process_env());
  if (!secret.empty()) return secret;
  TorchStore shared(store);
  return agree_secret_through_store(shared, rank, world_size);
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
  if (world_size > 1) options.secret = group_secret(*store, rank, world_size);
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
