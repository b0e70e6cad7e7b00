// The ps wire protocol end to end over loopback, in one process: a PsClient against PsService
// tasks. Pushes land on the right rows of the right task, push-pull returns the values after the
// update, a restarted worker continues its sequence numbers, sync replies wait for the step's R
// gradients, and a worker built for another model is refused with a message naming the flags.
#include "ps/ps_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <limits>
#include <memory>
#include <vector>

#include "base/error.h"
#include "comm/loopback.h"
#include "ps/ps_client.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;
using testing::kLoopbackSecret;
using ::testing::ThrowsMessage;

// Two variables big enough to be split over two ps tasks and cut into several shards each.
std::vector<ParamSpec> specs() { return {ParamSpec{"w", {64, 300}}, ParamSpec{"b", {300}}}; }

constexpr size_t kMinShardBytes = 4096;
constexpr size_t kMaxShardBytes = 16 * 1024;

PartitionMap map_for(const std::vector<ParamSpec>& s, int num_ps) {
  return make_partition(ParamSet(s), num_ps, Placement::kBalanced, kMinShardBytes, kMaxShardBytes);
}

// num_ps services on loopback ports, each for `workers` workers.
struct Cluster {
  Cluster(int num_ps, int workers, bool sync, int replicas = 0) : map(map_for(specs(), num_ps)) {
    for (int p = 0; p < num_ps; ++p) {
      PsServiceOptions o;
      o.ps = p;
      o.specs = specs();
      o.map = map;
      o.sync = SyncOptions{
          .sync_replicas = sync, .total_num_replicas = workers, .replicas_to_aggregate = replicas};
      o.server = testing::loopback_options();
      o.sync_wait_ms = 10'000;
      services.push_back(std::make_unique<PsService>(o));
    }
  }
  PsClientOptions client(int worker) const {
    PsClientOptions o;
    for (const auto& s : services) o.ps.push_back(HostPort{"127.0.0.1", s->port()});
    o.secret = std::string(kLoopbackSecret);
    o.connection = testing::client_options();
    o.worker = worker;
    return o;
  }
  PartitionMap map;
  std::vector<std::unique_ptr<PsService>> services;
};

void fill(ParamSet& set, float value) {
  for (size_t i = 0; i < set.count(); ++i)
    for (float& v : set.values(i)) v = value;
}

void fill_ramp(ParamSet& set) {
  for (size_t i = 0; i < set.count(); ++i) {
    auto values = set.values(i);
    for (size_t k = 0; k < values.size(); ++k) values[k] = 0.001f * static_cast<float>(k % 977);
  }
}

TEST(PsService, PushPullAppliesEveryShardOnItsTaskAndReturnsTheUpdate) {
  Cluster cluster(2, 1, /*sync=*/false);
  ASSERT_GT(cluster.map.shards.size(), 4u);  // the test is about many shards on two tasks
  ParamSet params(specs()), grads(specs()), expected(specs());
  fill_ramp(params);
  PsClient client(params, cluster.map, cluster.client(0));
  EXPECT_FALSE(client.initialized_at_hello());
  client.initialize(params, {}, 0);
  ASSERT_TRUE(client.wait_ready(1000));

  fill(grads, 2.0f);
  expected.copy_from(params);
  ParamSet pulled(specs());
  client.push_pull(grads, pulled, 0.25f);
  for (size_t i = 0; i < params.count(); ++i) {
    auto want = expected.values(i);
    auto got = pulled.values(i);
    for (size_t k = 0; k < got.size(); ++k)
      ASSERT_FLOAT_EQ(got[k], want[k] - 0.5f) << i << "," << k;
  }
  EXPECT_EQ(client.global_step(), 1);

  ParamSet again(specs());
  client.pull(again);
  for (size_t i = 0; i < params.count(); ++i) {
    auto a = again.values(i);
    auto b = pulled.values(i);
    ASSERT_TRUE(std::equal(a.begin(), a.end(), b.begin()));
  }
  client.worker_done(true);
  for (auto& s : cluster.services) s->run();  // returns: the only worker is done
}

TEST(PsService, ARestartedWorkerContinuesItsSequenceSoItsPushesAreNotDuplicates) {
  Cluster cluster(1, 1, /*sync=*/false);
  ParamSet params(specs()), grads(specs());
  {
    PsClient first(params, cluster.map, cluster.client(0));
    first.initialize(params, {}, 0);
    fill(grads, 1.0f);
    for (int i = 0; i < 3; ++i) first.push_pull(grads, params, 0.1f);
    EXPECT_EQ(first.next_sequence(), 3u);
  }
  PsClient second(params, cluster.map, cluster.client(0));
  EXPECT_TRUE(second.initialized_at_hello());
  EXPECT_EQ(second.next_sequence(), 3u);
  const RoundOutcome outcome = second.push_pull(grads, params, 0.1f);
  EXPECT_EQ(outcome.duplicates, 0);
  EXPECT_EQ(outcome.applied, static_cast<int>(cluster.map.shards.size()));
  EXPECT_EQ(second.global_step(), 4);
  EXPECT_FLOAT_EQ(params.values(0)[0], -0.4f);
}

TEST(PsService, NonFiniteShardsAreRejectedCountedAndLeaveTheValuesAlone) {
  Cluster cluster(2, 1, /*sync=*/false);
  ParamSet params(specs()), grads(specs()), pulled(specs());
  fill_ramp(params);
  PsClient client(params, cluster.map, cluster.client(0));
  client.initialize(params, {}, 0);
  // An infinity in the first shard and a NaN in the last, each on its own ps task: the rest of
  // the gradient is finite and applied.
  fill(grads, 1.0f);
  const Shard& first = cluster.map.shards.front();
  const Shard& last = cluster.map.shards.back();
  ASSERT_NE(first.ps, last.ps);
  grads.flat()[first.begin] = std::numeric_limits<float>::infinity();
  grads.flat()[last.end - 1] = std::numeric_limits<float>::quiet_NaN();
  const RoundOutcome outcome = client.push_pull(grads, pulled, 0.5f);
  EXPECT_EQ(outcome.rejected, 2);
  EXPECT_EQ(outcome.applied, static_cast<int>(cluster.map.shards.size()) - 2);
  for (const Shard* s : {&first, &last}) {
    for (size_t k = s->begin; k < s->end; ++k)
      ASSERT_EQ(pulled.flat()[k], params.flat()[k]) << "shard at " << s->begin << ", " << k;
  }
  const ps_protocol::DoneReply done = client.worker_done(true);
  EXPECT_EQ(done.rejected, 2);
  for (auto& s : cluster.services) s->run();
  int64_t counted = 0;
  for (auto& s : cluster.services) {
    for (size_t shard : s->store().shards()) counted += s->store().counters(shard).rejected;
  }
  EXPECT_EQ(counted, 2);
}

// A peer holding the secret can still send numbers that are not gradients: a push's learning rate
// and an initial step are checked as its gradient is, so they cannot poison the values.
TEST(PsService, PushesWithAnUnusableLearningRateAreRejectedCountedAndLeaveTheValuesAlone) {
  for (const bool sync : {false, true}) {
    Cluster cluster(1, 1, sync);
    ParamSet params(specs()), grads(specs()), pulled(specs());
    fill_ramp(params);
    PsClient client(params, cluster.map, cluster.client(0));
    client.initialize(params, {}, 0);
    fill(grads, 1.0f);
    const int shards = static_cast<int>(cluster.map.shards.size());
    int rejected = 0;
    for (const float lr : {std::numeric_limits<float>::quiet_NaN(),
                           -std::numeric_limits<float>::infinity(), -0.5f}) {
      const RoundOutcome outcome = client.push_pull(grads, pulled, lr);
      EXPECT_EQ(outcome.rejected, shards) << "lr " << lr << (sync ? ", sync" : ", async");
      rejected += outcome.rejected;
      ASSERT_TRUE(std::equal(pulled.flat().begin(), pulled.flat().end(), params.flat().begin()))
          << "lr " << lr;
    }
    EXPECT_EQ(client.worker_done(true).rejected, rejected);
    for (auto& s : cluster.services) s->run();
  }
}

TEST(PsService, AnInitialisationBelowStepZeroOrWithNonFiniteValuesIsRefusedNamingIt) {
  Cluster cluster(1, 1, /*sync=*/false);
  ParamSet params(specs());
  fill_ramp(params);
  {
    PsClient client(params, cluster.map, cluster.client(0));
    EXPECT_THAT([&] { client.initialize(params, {}, -1); },
                ThrowsMessage<Error>(HasSubstr("initialised at step -1, below 0")));
  }
  params.flat()[5] = std::numeric_limits<float>::quiet_NaN();
  PsClient client(params, cluster.map, cluster.client(0));
  EXPECT_THAT([&] { client.initialize(params, {}, 0); },
              ThrowsMessage<Error>(HasSubstr("initial values hold a NaN or an infinity")));
  EXPECT_FALSE(cluster.services[0]->store().wait_initialized(std::chrono::steady_clock::now()));
}

TEST(PsService, SyncRepliesCarryTheAverageOfBothWorkersGradients) {
  Cluster cluster(2, 2, /*sync=*/true);
  ParamSet init(specs());
  fill(init, 1.0f);
  std::vector<ParamSet> results(2, ParamSet(specs()));
  {
    PsClient chief(init, cluster.map, cluster.client(0));
    chief.initialize(init, {}, 0);
  }
  auto run_worker = [&](int worker, float gradient) {
    PsClient client(init, cluster.map, cluster.client(worker));
    client.pull(results[worker]);
    ParamSet grads(specs());
    fill(grads, gradient);
    client.push_pull(grads, results[worker], 1.0f);
    return client.global_step();
  };
  // Each worker's reply waits for the other's gradient, so they must run at once.
  auto a = std::async(std::launch::async, run_worker, 0, 2.0f);
  auto b = std::async(std::launch::async, run_worker, 1, 4.0f);
  EXPECT_EQ(a.get(), 1);
  EXPECT_EQ(b.get(), 1);
  for (const ParamSet& r : results) {
    for (size_t i = 0; i < r.count(); ++i)
      for (float v : r.values(i)) ASSERT_FLOAT_EQ(v, 1.0f - 3.0f);  // 1 - lr * mean(2, 4)
  }
}

// A process of its own that holds the cluster secret and speaks the ps protocol by hand: what a
// task with the secret could send.
class HandSpokenPeer {
 public:
  HandSpokenPeer(const PsService& service, const std::string& identity, uint64_t incarnation) {
    ConnectionOptions options = testing::client_options();
    options.identity = identity;
    options.incarnation = incarnation;
    connection_ = connect("127.0.0.1", service.port(), kLoopbackSecret, options);
  }

  // The reply's type, and its text if it is a kError.
  std::pair<uint16_t, std::string> request(uint16_t type, const ps_protocol::MetaWriter& meta,
                                           std::span<const std::span<const float>> tensors = {}) {
    connection_->send(type, 0, meta.bytes(), tensors);
    const auto in = connection_->receive();
    std::string text;
    if (in.type == ps_protocol::kError) text = ps_protocol::MetaReader(in.meta).rest_as_string();
    connection_->discard_tensors();
    return {in.type, text};
  }
  std::pair<uint16_t, std::string> hello(uint64_t fingerprint, int worker) {
    ps_protocol::MetaWriter meta;
    meta.put(fingerprint).put(static_cast<int32_t>(worker));
    return request(ps_protocol::kHello, meta);
  }
  std::pair<uint16_t, std::string> push(int worker, uint64_t sequence,
                                        std::span<const float> grad) {
    ps_protocol::MetaWriter meta;
    ps_protocol::write(meta, ps_protocol::PushMeta{
                                 .shard = 0, .worker = worker, .sequence = sequence, .lr = 0.1f});
    const std::span<const float> tensors[] = {grad};
    return request(ps_protocol::kPush, meta, tensors);
  }
  std::pair<uint16_t, std::string> done(int worker) {
    ps_protocol::MetaWriter meta;
    meta.put(static_cast<int32_t>(worker)).put(uint8_t{1});
    return request(ps_protocol::kWorkerDone, meta);
  }

 private:
  std::unique_ptr<Connection> connection_;
};

TEST(PsService, AWorkersPushesAndDoneReportCountOnlyOnTheConnectionItsHandshakeProved) {
  Cluster cluster(1, 2, /*sync=*/false);
  PsService& ps = *cluster.services[0];
  ParamSet params(specs()), grads(specs());
  PsClient worker0(params, cluster.map, cluster.client(0));
  worker0.initialize(params, {}, 0);
  fill(grads, 1.0f);
  worker0.push_pull(grads, params, 0.1f);
  const uint64_t fingerprint = partition_fingerprint(ParamSet(specs()), cluster.map);
  const std::vector<float> gradient(ps.store().shard_size(0), 1.0f);

  // A process with the secret that connected as worker 1 (which has not started).
  HandSpokenPeer forger(ps, "worker 1", 99);
  auto [type, text] = forger.hello(fingerprint, 0);
  EXPECT_EQ(type, ps_protocol::kError);
  EXPECT_THAT(text, HasSubstr("says hello as worker 0 but connected as \"worker 1\""));
  std::tie(type, text) = forger.push(0, 1'000'000, gradient);
  EXPECT_EQ(type, ps_protocol::kError);
  EXPECT_THAT(text, HasSubstr("a push as worker 0 without saying hello as that worker"));
  ASSERT_EQ(forger.hello(fingerprint, 1).first, ps_protocol::kHelloReply);
  std::tie(type, text) = forger.push(0, 1'000'000, gradient);
  EXPECT_EQ(type, ps_protocol::kError);
  EXPECT_THAT(text, HasSubstr("a push as worker 0 on the connection of worker 1"));
  std::tie(type, text) = forger.done(0);
  EXPECT_EQ(type, ps_protocol::kError);
  EXPECT_THAT(text, HasSubstr("a done report as worker 0 on the connection of worker 1"));
  EXPECT_EQ(ps.store().counters(0).applied, 1);

  // Nor can it take worker 0's place while worker 0 is connected.
  EXPECT_THAT([&] { HandSpokenPeer(ps, "worker 0", 98); },
              ThrowsMessage<AuthError>(HasSubstr("worker 0 is already connected from")));

  // Worker 0 goes on as if nothing had happened: its round is applied, not taken for a retry.
  const RoundOutcome outcome = worker0.push_pull(grads, params, 0.1f);
  EXPECT_EQ(outcome.duplicates, 0);
  EXPECT_EQ(outcome.applied, static_cast<int>(cluster.map.shards.size()));
  worker0.worker_done(true);
  EXPECT_EQ(forger.done(1).first, ps_protocol::kDoneReply);
  ps.run();
  EXPECT_EQ(ps.store().counters(0).duplicates, 0);
}

TEST(PsService, AWorkerWithAnotherModelIsRefusedWithTheFlagsToCheck) {
  Cluster cluster(1, 1, /*sync=*/false);
  const std::vector<ParamSpec> other = {ParamSpec{"w", {64, 301}}, ParamSpec{"b", {301}}};
  const ParamSet layout(other);
  const PartitionMap map = map_for(other, 1);
  try {
    PsClient client(layout, map, cluster.client(0));
    FAIL() << "a client with another layout was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("--model"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace dtrain
