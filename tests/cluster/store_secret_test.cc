// The cluster secret agreed through a store anyone may read (torch's TCPStore): ranks as threads
// over a map that keeps every value ever written, as an observer of the store would. Every rank
// gets the same fresh secret, the store never holds it, and a box altered in the store is refused
// naming its key.
#include "cluster/store_secret.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;

// A store whose get waits for the key, as c10d's does; `tamper` may change a value as it is set
// (what a process that writes the store could do). Thread-safe.
class MapStore : public SharedStore {
 public:
  std::function<void(const std::string& key, std::string& value)> tamper;

  void set(const std::string& key, const std::string& value) override {
    std::string stored = value;
    if (tamper) tamper(key, stored);
    std::lock_guard lock(mutex_);
    values_[key] = stored;
    written_.push_back(stored);
    changed_.notify_all();
  }
  std::string get(const std::string& key) override {
    std::unique_lock lock(mutex_);
    // A deadline against a rank that never writes, not a delay: the condition decides.
    if (!changed_.wait_for(lock, std::chrono::seconds(60), [&] { return values_.contains(key); }))
      throw std::runtime_error("no " + key + " in the store");
    return values_.at(key);
  }
  std::vector<std::string> keys() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> keys;
    for (const auto& [key, value] : values_) keys.push_back(key);
    return keys;
  }
  // Every value set, in order, including any later overwritten.
  std::vector<std::string> written() const {
    std::lock_guard lock(mutex_);
    return written_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> written_;
};

// Each rank's secret, or its error's text prefixed "error: ".
std::vector<std::string> agree(MapStore& store, int world_size) {
  std::vector<std::string> results(static_cast<size_t>(world_size));
  std::vector<std::jthread> ranks;
  for (int rank = 0; rank < world_size; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        results[static_cast<size_t>(rank)] = agree_secret_through_store(store, rank, world_size);
      } catch (const Error& e) {
        results[static_cast<size_t>(rank)] = std::string("error: ") + e.what();
      }
    });
  }
  ranks.clear();  // joins
  return results;
}

TEST(StoreSecret, EveryRankGetsTheSameSecretAndNoValueTheStoreEverHeldContainsIt) {
  for (const int world_size : {2, 3, 5}) {
    SCOPED_TRACE(world_size);
    MapStore store;
    const std::vector<std::string> secrets = agree(store, world_size);
    ASSERT_GE(secrets[0].size(), 16u) << secrets[0];
    EXPECT_EQ(secrets, std::vector<std::string>(static_cast<size_t>(world_size), secrets[0]));
    for (const std::string& value : store.written()) {
      EXPECT_EQ(value.find(secrets[0]), std::string::npos) << "the store held the secret";
      // Nor half of it, in case a box were the secret in the clear beside its tag.
      EXPECT_EQ(value.find(secrets[0].substr(0, secrets[0].size() / 2)), std::string::npos);
    }
    std::vector<std::string> expected;
    for (int r = 0; r < world_size; ++r) expected.push_back(store_key_key(r));
    for (int r = 1; r < world_size; ++r) expected.push_back(store_sealed_key(r));
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(store.keys(), expected);
  }
}

TEST(StoreSecret, EachRendezvousDrawsAFreshSecret) {
  MapStore first, second;
  EXPECT_NE(agree(first, 2)[0], agree(second, 2)[0]);
}

// A box altered in the store does not open: the rank says which key, and how to need no store.
TEST(StoreSecret, ABoxAlteredInTheStoreIsRefusedNamingItsKey) {
  MapStore store;
  store.tamper = [](const std::string& key, std::string& value) {
    if (key == store_sealed_key(1)) value[0] = static_cast<char>(value[0] ^ 1);
  };
  const std::vector<std::string> results = agree(store, 2);
  EXPECT_THAT(results[1], HasSubstr("error: the store's dtrain/sealed/1 does not open with this "
                                    "rank's key: another process wrote to the store"));
  EXPECT_THAT(results[1], HasSubstr("DTRAIN_SECRET"));
}

// A public key the store holds that is no key at all (a wrong size; the all-zero point, whose
// agreement everyone knows) is refused, by rank 0 for a rank's and by a rank for rank 0's. Each
// side runs alone over a store that already holds the bad key, so nothing waits for the other.
TEST(StoreSecret, AStoredValueThatIsNoPublicKeyIsRefusedNamingItsKey) {
  for (const std::string& bad : {std::string("short"), std::string(32, '\0')}) {
    for (const int culprit : {0, 1}) {
      SCOPED_TRACE(culprit);
      MapStore store;
      store.set(store_key_key(culprit), bad);
      EXPECT_THAT([&] { agree_secret_through_store(store, culprit == 0 ? 1 : 0, 2); },
                  ::testing::ThrowsMessage<AuthError>(HasSubstr(
                      "the store's " + store_key_key(culprit) + " is no X25519 public key")));
    }
  }
}

}  // namespace
}  // namespace dtrain
