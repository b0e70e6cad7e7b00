// The ps wire protocol end to end over loopback, in one process: a PsClient against PsService
// tasks. Pushes land on the right rows of the right task, push-pull returns the values after the
// update, a restarted worker continues its sequence numbers, sync replies wait for the step's R
// gradients, and a worker built for another model is refused with a message naming the flags —
// with payloads in the frames and through memory alike. Through memory, a peer that has not
// proved its memory reachable cannot push by reference, and a worker and a ps that disagree on
// --transport shm refuse each other by name.
#include "ps/ps_service.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "comm/connect.h"
#include "comm/loopback.h"
#include "comm/transport.h"
#include "ps/ps_client.h"
#include "ps/worker_claim.h"

namespace dtrain {
namespace {

using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::Eq;
using ::testing::HasSubstr;
using testing::kLoopbackSecret;
using ::testing::StartsWith;
using ::testing::ThrowsMessage;

// Two variables big enough to be split over two ps tasks and cut into several shards each.
std::vector<ParamSpec> service_specs() {
  return {ParamSpec{"w", {64, 300}}, ParamSpec{"b", {300}}};
}

constexpr size_t kMinShardBytes = 4096;
constexpr size_t kMaxShardBytes = 16 * 1024;

PartitionMap map_for(const std::vector<ParamSpec>& s, int num_ps) {
  return make_partition(ParamSet(s), num_ps, Placement::kBalanced, kMinShardBytes, kMaxShardBytes);
}

// num_ps services on loopback ports, each for `workers` workers.
struct Cluster {
  Cluster(int num_ps, int workers, bool sync, int replicas = 0,
          Transport transport = Transport::kAuto, int worker_timeout_ms = 60'000)
      : map(map_for(service_specs(), num_ps)), transport(transport) {
    for (int p = 0; p < num_ps; ++p) {
      PsServiceOptions o;
      o.ps = p;
      o.specs = service_specs();
      o.map = map;
      o.sync = SyncOptions{
          .sync_replicas = sync, .total_num_replicas = workers, .replicas_to_aggregate = replicas};
      o.server = testing::loopback_options();
      o.sync_wait_ms = 10'000;
      o.transport = transport;
      o.worker_timeout_ms = worker_timeout_ms;
      services.push_back(std::make_unique<PsService>(o));
    }
  }
  PsClientOptions client(int worker) const {
    PsClientOptions o;
    for (const auto& s : services) o.ps.push_back(HostPort{"127.0.0.1", s->port()});
    o.secret = std::string(kLoopbackSecret);
    o.connection = testing::client_options();
    o.worker = worker;
    o.transport = transport;
    return o;
  }
  PartitionMap map;
  Transport transport;
  std::vector<std::unique_ptr<PsService>> services;
};

void fill_with(ParamSet& set, float value) {
  for (size_t i = 0; i < set.count(); ++i)
    for (float& v : set.values(i)) v = value;
}

void fill_ramp(ParamSet& set) {
  for (size_t i = 0; i < set.count(); ++i) {
    auto values = set.values(i);
    for (size_t k = 0; k < values.size(); ++k) values[k] = 0.001f * static_cast<float>(k % 977);
  }
}

// Under --transport tcp and auto; auto moves payloads through memory here, every task being in
// this process.
class PsServiceTransportTest : public ::testing::TestWithParam<Transport> {
 protected:
  // Asserts that the client's payloads go the way the parameter says to every ps.
  void expect_paths(const PsClient& client, const Cluster& cluster) {
    for (int p = 0; p < static_cast<int>(cluster.services.size()); ++p) {
      EXPECT_EQ(client.link_traits(p).in_memory, GetParam() != Transport::kTcp) << "ps" << p;
      // No reason why not: memory where asked for, TCP where not.
      EXPECT_THAT(client.describe_link(p), AnyOf(Eq("shm"), StartsWith("tcp (congestion control ")))
          << "ps" << p;
    }
  }
};

TEST_P(PsServiceTransportTest, PushPullAppliesEveryShardOnItsTaskAndReturnsTheUpdate) {
  Cluster cluster(2, 1, /*sync=*/false, 0, GetParam());
  ASSERT_GT(cluster.map.shards.size(), 4u);  // the test is about many shards on two tasks
  ParamSet params(service_specs()), grads(service_specs()), expected(service_specs());
  fill_ramp(params);
  PsClient client(params, cluster.map, cluster.client(0));
  expect_paths(client, cluster);
  EXPECT_FALSE(client.initialized_at_hello());
  client.initialize(params, {}, 0);
  ASSERT_TRUE(client.wait_ready(1000));

  fill_with(grads, 2.0f);
  expected.copy_from(params);
  ParamSet pulled(service_specs());
  client.push_pull(grads, pulled, 0.25f);
  for (size_t i = 0; i < params.count(); ++i) {
    auto want = expected.values(i);
    auto got = pulled.values(i);
    for (size_t k = 0; k < got.size(); ++k)
      ASSERT_FLOAT_EQ(got[k], want[k] - 0.5f) << i << "," << k;
  }
  EXPECT_EQ(client.global_step(), 1);

  ParamSet again(service_specs());
  client.pull(again);
  for (size_t i = 0; i < params.count(); ++i) {
    auto a = again.values(i);
    auto b = pulled.values(i);
    ASSERT_TRUE(std::equal(a.begin(), a.end(), b.begin()));
  }
  client.worker_done(true);
  for (auto& s : cluster.services) s->run();  // returns: the only worker is done
}

TEST_P(PsServiceTransportTest, ARestartedWorkerContinuesItsSequenceSoItsPushesAreNotDuplicates) {
  Cluster cluster(1, 1, /*sync=*/false, 0, GetParam());
  ParamSet params(service_specs()), grads(service_specs());
  {
    PsClient first(params, cluster.map, cluster.client(0));
    first.initialize(params, {}, 0);
    fill_with(grads, 1.0f);
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

TEST_P(PsServiceTransportTest, NonFiniteShardsAreRejectedCountedAndLeaveTheValuesAlone) {
  Cluster cluster(2, 1, /*sync=*/false, 0, GetParam());
  ParamSet params(service_specs()), grads(service_specs()), pulled(service_specs());
  fill_ramp(params);
  PsClient client(params, cluster.map, cluster.client(0));
  client.initialize(params, {}, 0);
  // An infinity in the first shard and a NaN in the last, each on its own ps task: the rest of
  // the gradient is finite and applied.
  fill_with(grads, 1.0f);
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
TEST_P(PsServiceTransportTest,
       PushesWithAnUnusableLearningRateAreRejectedCountedAndLeaveTheValuesAlone) {
  for (const bool sync : {false, true}) {
    Cluster cluster(1, 1, sync, 0, GetParam());
    ParamSet params(service_specs()), grads(service_specs()), pulled(service_specs());
    fill_ramp(params);
    PsClient client(params, cluster.map, cluster.client(0));
    client.initialize(params, {}, 0);
    fill_with(grads, 1.0f);
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
  ParamSet params(service_specs());
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

TEST_P(PsServiceTransportTest, SyncRepliesCarryTheAverageOfBothWorkersGradients) {
  Cluster cluster(2, 2, /*sync=*/true, 0, GetParam());
  ParamSet init(service_specs());
  fill_with(init, 1.0f);
  std::vector<ParamSet> results(2, ParamSet(service_specs()));
  {
    PsClient chief(init, cluster.map, cluster.client(0));
    chief.initialize(init, {}, 0);
  }
  auto run_worker = [&](int worker, float gradient) {
    PsClient client(init, cluster.map, cluster.client(worker));
    expect_paths(client, cluster);
    client.pull(results[worker]);
    ParamSet grads(service_specs());
    fill_with(grads, gradient);
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

INSTANTIATE_TEST_SUITE_P(Transports, PsServiceTransportTest,
                         ::testing::Values(Transport::kTcp, Transport::kAuto),
                         [](const ::testing::TestParamInfo<Transport>& info) {
                           return info.param == Transport::kTcp ? "Tcp" : "Memory";
                         });

// A process of its own that holds the cluster secret and speaks the ps protocol by hand: what a
// task with the secret could send.
class HandSpokenPeer {
 public:
  HandSpokenPeer(const PsService& service, const std::string& identity, uint64_t incarnation) {
    ConnectionOptions options = testing::client_options();
    options.identity = identity;
    options.incarnation = incarnation;
    connection_ = connect("127.0.0.1", service.port(), kLoopbackSecret, options);
    ps_port_ = service.port();
  }

  // The reply's type, and its text if it is a kError (else its meta, as text).
  std::pair<uint16_t, std::string> request(uint16_t type, const ps_protocol::MetaWriter& meta,
                                           std::span<const std::span<const float>> tensors = {}) {
    connection_->send(type, 0, meta.bytes(), tensors);
    const auto in = connection_->receive();
    const std::string text = ps_protocol::MetaReader(in.meta).rest_as_peer_text();
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
  // What a kHelloReply says beyond its ps, initialisation, next sequence and step.
  struct HelloReply {
    uint64_t instance = 0;
    int64_t restored_step = 0;
  };
  HelloReply hello_reply(uint64_t fingerprint, int worker) {
    ps_protocol::MetaWriter meta;
    meta.put(fingerprint).put(static_cast<int32_t>(worker));
    connection_->send(ps_protocol::kHello, 0, meta.bytes(), {});
    const auto in = connection_->receive();
    EXPECT_EQ(in.type, ps_protocol::kHelloReply);
    ps_protocol::MetaReader r(in.meta);
    r.get<int32_t>();   // ps
    r.get<uint8_t>();   // initialized
    r.get<uint64_t>();  // next sequence
    r.get<int64_t>();   // step
    HelloReply reply;
    reply.instance = r.get<uint64_t>();
    reply.restored_step = r.get<int64_t>();
    return reply;
  }
  // Which ps process answers a hello, and the step it restored.
  std::pair<uint64_t, int64_t> hello_instance(uint64_t fingerprint, int worker) {
    const HelloReply reply = hello_reply(fingerprint, worker);
    return {reply.instance, reply.restored_step};
  }
  void send(uint16_t type, const ps_protocol::MetaWriter& meta) {
    connection_->send(type, 0, meta.bytes(), {});
  }
  void close() { connection_->close(); }
  std::pair<uint16_t, std::string> init(std::span<const float> values, int64_t step) {
    ps_protocol::MetaWriter meta;
    meta.put(uint32_t{0}).put(step).put(uint32_t{0});  // shard 0, no slots
    const std::span<const float> tensors[] = {values};
    return request(ps_protocol::kInit, meta, tensors);
  }
  std::pair<uint16_t, std::string> push_computed_at(int worker, int64_t step,
                                                    std::span<const float> grad) {
    ps_protocol::MetaWriter meta;
    ps_protocol::write(
        meta,
        ps_protocol::PushMeta{
            .shard = 0, .worker = worker, .sequence = 1, .computed_at_step = step, .lr = 0.1f});
    const std::span<const float> tensors[] = {grad};
    return request(ps_protocol::kPush, meta, tensors);
  }
  std::pair<uint16_t, std::string> wait_ready(uint32_t timeout_ms) {
    send_wait_ready(timeout_ms);
    return answer();
  }
  void send_wait_ready(uint32_t timeout_ms) {
    ps_protocol::MetaWriter meta;
    meta.put(timeout_ms);
    connection_->send(ps_protocol::kWaitReady, 0, meta.bytes(), {});
  }
  std::pair<uint16_t, std::string> answer() {
    const auto in = connection_->receive();
    const std::string text = ps_protocol::MetaReader(in.meta).rest_as_peer_text();
    connection_->discard_tensors();
    return {in.type, text};
  }
  // Waits until the ps has read everything sent to it on this connection: the kernel's table of
  // TCP sockets shows nothing queued at the ps's end. Returns false if that takes over a minute.
  bool read_by_ps() const {
    sockaddr_in local{};
    socklen_t length = sizeof local;
    getsockname(connection_->socket_fd(), reinterpret_cast<sockaddr*>(&local), &length);
    // The ps's end: local address 127.0.0.1:ps port, remote address ours.
    const std::string ends =
        fmt::format("0100007F:{:04X} 0100007F:{:04X}", ps_port_, ntohs(local.sin_port));
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    while (std::chrono::steady_clock::now() < give_up) {
      std::ifstream table("/proc/net/tcp");
      for (std::string line; std::getline(table, line);) {
        const size_t at = line.find(ends);
        if (at == std::string::npos) continue;
        // "... st tx_queue:rx_queue ...": the receive queue is the hex number after the colon.
        const std::string queues = line.substr(at + ends.size() + 4, 17);
        if (std::stoul(queues.substr(9), nullptr, 16) == 0) return true;
      }
      std::this_thread::yield();
    }
    return false;
  }
  std::pair<uint16_t, std::string> done(int worker) {
    ps_protocol::MetaWriter meta;
    meta.put(static_cast<int32_t>(worker)).put(uint8_t{1});
    return request(ps_protocol::kWorkerDone, meta);
  }

 private:
  uint16_t ps_port_ = 0;
  std::unique_ptr<Connection> connection_;
};

TEST(PsService, AWorkersPushesAndDoneReportCountOnlyOnTheConnectionItsHandshakeProved) {
  Cluster cluster(1, 2, /*sync=*/false);
  PsService& ps = *cluster.services[0];
  ParamSet params(service_specs()), grads(service_specs());
  PsClient worker0(params, cluster.map, cluster.client(0));
  worker0.initialize(params, {}, 0);
  fill_with(grads, 1.0f);
  worker0.push_pull(grads, params, 0.1f);
  const uint64_t fingerprint = partition_fingerprint(ParamSet(service_specs()), cluster.map);
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

// With the secret, a process may still not set the variables unless it is the chief's, and the
// chief's only once: anyone else's init is refused, and so is a step that would overflow.
TEST(PsService, OnlyTheChiefsProcessInitialisesOnceAndStepsAreRangeChecked) {
  Cluster cluster(1, 2, /*sync=*/false);
  PsService& ps = *cluster.services[0];
  const uint64_t fingerprint = partition_fingerprint(ParamSet(service_specs()), cluster.map);
  const std::vector<float> values(ps.store().shard_size(0), 1.0f);

  HandSpokenPeer anonymous(ps, "", 71);
  ASSERT_EQ(anonymous.hello(fingerprint, -1).first, ps_protocol::kHelloReply);
  auto [type, text] = anonymous.init(values, 0);
  EXPECT_EQ(type, ps_protocol::kError);
  EXPECT_THAT(text, HasSubstr("an init as worker 0 without saying hello as that worker"));
  HandSpokenPeer worker1(ps, "worker 1", 72);
  ASSERT_EQ(worker1.hello(fingerprint, 1).first, ps_protocol::kHelloReply);
  std::tie(type, text) = worker1.init(values, 0);
  EXPECT_EQ(type, ps_protocol::kError);
  EXPECT_THAT(text, HasSubstr("an init as worker 0 on the connection of worker 1"));
  EXPECT_FALSE(ps.store().initialized());

  {
    HandSpokenPeer chief(ps, "worker 0", 73);
    ASSERT_EQ(chief.hello(fingerprint, 0).first, ps_protocol::kHelloReply);
    std::tie(type, text) = chief.init(values, std::numeric_limits<int64_t>::max());
    EXPECT_EQ(type, ps_protocol::kError);
    EXPECT_THAT(text, HasSubstr("over the largest step"));
    EXPECT_EQ(chief.init(values, 5).first, ps_protocol::kAck);
    EXPECT_EQ(chief.init(values, 5).first, ps_protocol::kAck) << "a retry of the same process";
    std::tie(type, text) = chief.push_computed_at(0, std::numeric_limits<int64_t>::max(), values);
    EXPECT_EQ(type, ps_protocol::kError);
    EXPECT_THAT(text, HasSubstr("computed at step 9223372036854775807: out of range"));
  }
  // Another process of the chief, once the first has gone.
  ASSERT_TRUE(
      ps.wait_for([](const ServerStats& s) { return s.finished >= 1; }, std::chrono::seconds(30)));
  HandSpokenPeer second_chief(ps, "worker 0", 74);
  ASSERT_EQ(second_chief.hello(fingerprint, 0).first, ps_protocol::kHelloReply);
  std::tie(type, text) = second_chief.init(values, 0);
  EXPECT_EQ(type, ps_protocol::kError);
  EXPECT_THAT(text, HasSubstr("which another process of the chief initialised already"));
  EXPECT_EQ(ps.store().counters(0).step, 5);
}

// A wait for the variables, however long it asks for, ends when the ps is told to stop: it must
// not hold the connection's thread, which the shutdown joins, for the rest of its timeout.
TEST(PsService, AParkedWaitForTheVariablesEndsAtShutdown) {
  StopRequest stop;
  PsServiceOptions options;
  options.ps = 0;
  options.specs = service_specs();
  options.map = map_for(service_specs(), 1);
  options.sync = SyncOptions{.sync_replicas = false, .total_num_replicas = 1};
  options.server = testing::loopback_options();
  options.stop = &stop;
  PsService ps(options);
  HandSpokenPeer waiter(ps, "", 81);
  waiter.send_wait_ready(std::numeric_limits<uint32_t>::max());
  ASSERT_TRUE(waiter.read_by_ps());  // so the wait is parked, or about to be, on the ps's thread
  stop.request(SIGTERM);
  auto stopped = std::async(std::launch::async, [&] { ps.run(); });
  // A watchdog, not a timing: before the fix this never returned (the wait was 49 days).
  ASSERT_EQ(stopped.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  // The wait was answered before the ps closed the connection.
  EXPECT_EQ(waiter.answer().first, ps_protocol::kReady);
}

// What lets a worker tell a restarted ps from a cut connection, and report the steps that went
// with the restart even after other workers have pushed the ps past them: each ps process answers
// with an instance of its own and the step of the checkpoint it restored.
TEST(PsService, AHelloNamesThePsProcessAndTheStepItRestored) {
  Cluster cluster(1, 1, /*sync=*/false);
  PsServiceOptions options;
  options.specs = service_specs();
  options.map = cluster.map;
  options.sync = SyncOptions{.sync_replicas = false, .total_num_replicas = 1};
  options.server = testing::loopback_options();
  ParamSet restored_values(service_specs());
  fill_ramp(restored_values);
  const PsRestoredState checkpoint{restored_values, {}, 7};
  PsService restarted(options, &checkpoint);
  const uint64_t fingerprint = partition_fingerprint(ParamSet(service_specs()), cluster.map);

  HandSpokenPeer first(*cluster.services[0], "worker 0", 11);
  const auto [first_instance, first_restored] = first.hello_instance(fingerprint, 0);
  EXPECT_EQ(first_restored, -1) << "a ps the chief initialises restored nothing";
  HandSpokenPeer second(restarted, "worker 0", 12);
  const auto [second_instance, second_restored] = second.hello_instance(fingerprint, 0);
  EXPECT_EQ(second_restored, 7);
  EXPECT_NE(first_instance, second_instance);
  // The same process answers alike every time it is asked.
  EXPECT_EQ(second.hello_instance(fingerprint, 0), std::make_pair(second_instance, int64_t{7}));
}

// A worker that lost its ps to a restart reports the steps the restart took back, even when
// another worker reached the restarted ps first and pushed it past the step this one last saw.
TEST(PsService, AWorkerReportsTheStepsARestartedPsLostAfterOthersPushedItPastThem) {
  Cluster cluster(1, 2, /*sync=*/false);
  const uint16_t port = cluster.services[0]->port();
  ParamSet params(service_specs()), grads(service_specs());
  fill_with(grads, 1.0f);
  std::vector<std::string> reports;
  PsClientOptions first_options = cluster.client(0);
  first_options.report = [&reports](const std::string& line) { reports.push_back(line); };
  const PsClientOptions second_options = cluster.client(1);
  PsClient first(params, cluster.map, first_options);
  first.initialize(params, {}, 0);
  for (int i = 0; i < 5; ++i) first.push_pull(grads, params, 0.1f);
  ASSERT_EQ(first.global_step(), 5);

  // The ps restarts on its port from a checkpoint of step 2.
  cluster.services[0].reset();
  PsServiceOptions options;
  options.specs = service_specs();
  options.map = cluster.map;
  options.sync = SyncOptions{.sync_replicas = false, .total_num_replicas = 2};
  options.server = testing::loopback_options();
  options.server.port = port;
  ParamSet checkpoint_values(service_specs());
  const PsRestoredState checkpoint{checkpoint_values, {}, 2};
  PsService restarted(options, &checkpoint);

  PsClient second(params, cluster.map, second_options);
  for (int i = 0; i < 6; ++i) second.push_pull(grads, params, 0.1f);
  ASSERT_EQ(second.global_step(), 8);

  first.push_pull(grads, params, 0.1f);
  EXPECT_EQ(first.global_step(), 9);
  EXPECT_THAT(
      reports,
      ::testing::Contains(HasSubstr("restored at global step 2: the 3 steps after that are lost")));
}

// --transport shm on one side and tcp on the other: the link step refuses the connection on both
// sides, naming the flag and both tasks, and the client does not retry it. auto against tcp
// trains over TCP.
TEST(PsService, ShmAgainstTcpIsRefusedNamingTheFlagAndAutoFallsBackToTcp) {
  ParamSet params(service_specs());
  {
    Cluster cluster(1, 1, /*sync=*/false, 0, Transport::kTcp);
    PsClientOptions options = cluster.client(0);
    options.transport = Transport::kShm;
    EXPECT_THAT(
        [&] { PsClient client(params, cluster.map, options); },
        ThrowsMessage<LinkRefused>(AllOf(HasSubstr("--transport shm"), HasSubstr("ps0"),
                                         HasSubstr("--transport tcp"), HasSubstr("worker0"))));
    options.transport = Transport::kAuto;
    PsClient client(params, cluster.map, options);
    EXPECT_FALSE(client.link_traits(0).in_memory);
    EXPECT_THAT(client.describe_link(0),
                StartsWith("tcp (ps0 was started with --transport tcp; congestion control "));
    client.initialize(params, {}, 0);
    client.pull(params);
  }
  {
    Cluster cluster(1, 1, /*sync=*/false, 0, Transport::kShm);
    PsClientOptions options = cluster.client(0);
    options.transport = Transport::kTcp;
    EXPECT_THAT([&] { PsClient client(params, cluster.map, options); },
                ThrowsMessage<Error>(AllOf(HasSubstr("--transport shm"), HasSubstr("ps0"),
                                           HasSubstr("--transport tcp"))));
    options.transport = Transport::kAuto;
    PsClient client(params, cluster.map, options);
    EXPECT_TRUE(client.link_traits(0).in_memory);
  }
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

// An async job of 2 workers that takes joiners up to 4: identities 2 and 3 are for joiners. A
// process that claims again (its reply was cut) gets the identity held for it, so one process
// cannot hoard them; other processes get the others, until none is free.
TEST(PsService, AProcessHoldsOneClaimAndAClaimAskedAgainGetsTheSameIdentity) {
  PsServiceOptions o;
  o.ps = 0;
  o.specs = service_specs();
  o.map = map_for(service_specs(), 1);
  o.sync = SyncOptions{.sync_replicas = false, .total_num_replicas = 4};
  o.planned_workers = 2;
  o.ps_hosts = "127.0.0.1:1";
  o.server = testing::loopback_options();
  PsService service(o);
  const auto claim_as = [&](uint64_t process) {
    PsClientOptions client;
    client.ps = {HostPort{"127.0.0.1", service.port()}};
    client.secret = std::string(kLoopbackSecret);
    client.connection = testing::client_options();
    client.connection.incarnation = process;
    client.worker = -1;
    return claim_worker(client, 10'000).worker;
  };
  EXPECT_EQ(claim_as(11), 2);
  EXPECT_EQ(claim_as(11), 2) << "asked again by the same process";
  EXPECT_EQ(claim_as(12), 3);
  EXPECT_THAT([&] { claim_as(13); }, ThrowsMessage<Error>(HasSubstr("no worker identity is free")));
}

}  // namespace
}  // namespace dtrain
