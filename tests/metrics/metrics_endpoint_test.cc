// --metrics_port end to end (issue 36): real dtrain processes serve Prometheus's text format, which
// Python's urllib fetches and Prometheus's own promtool checks; the values are the run's.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/metrics_page.h"
#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/raw_client.h"
#include "support/tamper_relay.h"
#include "support/text_match.h"

namespace dtrain {
namespace {

using testing::all_matches;
using testing::all_output;
using testing::concat;
using testing::DtrainProcess;
using ::testing::HasSubstr;
using testing::Match;
using testing::metrics_urls;
using testing::sample;

// Training slow enough (--step_delay_ms) to be scraped mid-run.
std::vector<std::string> scraped_training(int steps) {
  return concat(testing::with_flag(testing::softmax_flags(), "--log_every", "50"),
                {"--train_steps", std::to_string(steps), "--step_delay_ms", "4"});
}

void expect_promtool_accepts(const std::string& page) {
  const testing::ProcessResult check = testing::promtool_check(page);
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err << "\n" << page;
}

TEST(MetricsEndpoint, ALocalRunServesWhereItIsInAPagePromtoolAccepts) {
  DtrainProcess run(concat({"train", "--metrics_port", "0"}, scraped_training(1500)));
  const std::vector<std::string> urls = metrics_urls(run, 1);
  ASSERT_EQ(urls.size(), 1u);
  ASSERT_THAT(run.wait_for_line("step 100,"), HasSubstr("step 100,"));
  const std::string page = testing::scrape(urls[0]);
  expect_promtool_accepts(page);
  const std::optional<double> local = sample(page, R"(dtrain_local_step{task="local"})");
  const std::optional<double> examples = sample(page, R"(dtrain_examples_total{task="local"})");
  ASSERT_TRUE(local && examples) << page;
  EXPECT_GE(*local, 100);
  // A scrape reads the series one after another while the steps go on: they may be a step apart.
  EXPECT_NEAR(*examples, *local * 100, 100);
  EXPECT_NEAR(sample(page, R"(dtrain_global_step{task="local"})").value_or(-9), *local, 1);
  EXPECT_NEAR(sample(page, R"(dtrain_step_seconds_count{phase="step",task="local"})").value_or(-9),
              *local, 1);
  EXPECT_EQ(sample(page, R"(dtrain_workers{task="local"})"), 1.0);
  EXPECT_GT(sample(page, R"(dtrain_process_resident_memory_bytes{task="local"})").value_or(0),
            10e6);
  EXPECT_GE(sample(page, R"(dtrain_process_threads{task="local"})").value_or(0), 2);
  run.send_signal(SIGTERM);
  EXPECT_EQ(run.wait().exit_code, 128 + SIGTERM);
}

TEST(MetricsEndpoint, EveryTaskOfALocalAsyncClusterServesItsOwnPage) {
  DtrainProcess run(
      concat({"train", "--strategy", "async", "--workers", "2", "--metrics_port", "0"},
             scraped_training(1500)));
  const std::vector<std::string> urls = metrics_urls(run, 3);
  ASSERT_EQ(urls.size(), 3u);
  for (const int worker : {0, 1}) {
    ASSERT_THAT(
        run.wait_for_line(fmt::format("[worker{0}] worker={0}, epoch=0, global_step=", worker)),
        HasSubstr("local_step=50,"));
  }
  int pages = 0;
  for (const std::string& url : urls) {
    const std::string page = testing::scrape(url);
    expect_promtool_accepts(page);
    if (sample(page, R"(dtrain_ps_updates_applied_total{task="ps0"})")) {
      ++pages;
      EXPECT_GE(*sample(page, R"(dtrain_ps_updates_applied_total{task="ps0"})"), 100) << page;
      EXPECT_EQ(sample(page, R"(dtrain_ps_connected_workers{task="ps0"})"), 2.0) << page;
      EXPECT_EQ(sample(page, R"(dtrain_workers{task="ps0"})"), 2.0) << page;
      continue;
    }
    for (const int worker : {0, 1}) {
      const std::string task = fmt::format(R"({{task="worker{}"}})", worker);
      if (!sample(page, "dtrain_local_step" + task)) continue;
      ++pages;
      EXPECT_GE(*sample(page, "dtrain_local_step" + task), 50) << page;
      EXPECT_EQ(sample(page, "dtrain_workers" + task), 2.0) << page;
    }
  }
  EXPECT_EQ(pages, 3) << "ps0, worker0 and worker1, each on its own page";
  run.send_signal(SIGTERM);
  run.wait();
}

// The other cluster strategies: each task's page, mid-run, passes promtool and says where the task
// is. (towers is a local run's single process, as above.)
struct StrategyPages {
  const char* strategy;
  size_t tasks;                     // that serve a page
  const char* step_line;            // what its 50th step's line says
  std::vector<std::string> phases;  // a worker's step phases besides "step"
};

class MetricsEndpointUnder : public ::testing::TestWithParam<StrategyPages> {};

TEST_P(MetricsEndpointUnder, EveryTaskServesAPagePromtoolAccepts) {
  const StrategyPages& p = GetParam();
  DtrainProcess run(
      concat({"train", "--strategy", p.strategy, "--metrics_port", "0"}, scraped_training(1500)));
  const std::vector<std::string> urls = metrics_urls(run, p.tasks);
  ASSERT_EQ(urls.size(), p.tasks);
  ASSERT_THAT(run.wait_for_line(p.step_line), HasSubstr(p.step_line));
  int workers = 0;
  for (const std::string& url : urls) {
    const std::string page = testing::scrape(url);
    expect_promtool_accepts(page);
    EXPECT_THAT(page, HasSubstr("\ndtrain_global_step{task=\"")) << page;
    const size_t at = page.find("\ndtrain_local_step{task=\"worker");
    if (at == std::string::npos) continue;
    ++workers;
    // Every phase of the worker's steps is timed, each step once.
    const std::string task = page.substr(at + 25, page.find('"', at + 25) - (at + 25));
    const std::optional<double> steps =
        sample(page, fmt::format(R"(dtrain_step_seconds_count{{phase="step",task="{}"}})", task));
    ASSERT_TRUE(steps) << page;
    for (const std::string& phase : p.phases) {
      EXPECT_NEAR(sample(page, fmt::format(R"(dtrain_step_seconds_count{{phase="{}",task="{}"}})",
                                           phase, task))
                      .value_or(-9),
                  *steps, 1)
          << phase << "\n"
          << page;
    }
    if (std::string(p.strategy) == "allreduce") {
      // softmax's gradients are one bucket, all-reduced once a step.
      const std::vector<Match> buckets =
          all_matches(page, R"(dtrain_allreduce_seconds_count\{bucket_bytes="[0-9]+",task=")" +
                                task + R"("\} ([0-9]+))");
      ASSERT_EQ(buckets.size(), 1u) << page;
      EXPECT_NEAR(std::stod(buckets[0].at(1)), *steps, 1) << page;
    }
  }
  EXPECT_EQ(workers, 2);
  run.send_signal(SIGTERM);
  run.wait();
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, MetricsEndpointUnder,
    ::testing::Values(StrategyPages{"sync", 3, "global_step=50,", {"compute", "communicate"}},
                      StrategyPages{
                          "allreduce", 2, "global_step=50,", {"compute", "communicate", "apply"}}),
    [](const ::testing::TestParamInfo<StrategyPages>& info) {
      return std::string(info.param.strategy);
    });

// A ps task's connections: bytes by peer, and what it refused by peer and reason — a frame forged
// on the way (support/tamper_relay.h) from worker0, and a handshake with another secret from an
// address that proved nothing.
TEST(MetricsEndpoint, APsTaskCountsBytesByPeerAndRefusalsByPeerAndReason) {
  testing::HandStartedCluster cluster(1, 1);
  const std::vector<std::string> flags =
      concat(testing::softmax_flags(),
             {"--train_steps", "100000", "--transport", "tcp", "--peer_timeout", "5"});
  const std::unique_ptr<DtrainProcess> ps =
      cluster.start("ps", 0, concat(flags, {"--metrics_port", "0"}));
  const std::vector<std::string> urls = metrics_urls(*ps, 1);
  ASSERT_EQ(urls.size(), 1u);
  testing::TamperRelay relay(cluster.ps_port(0), testing::Attack::kForgeDoneWithTensors);
  cluster.route_workers_to_ps(0, relay.port());
  const std::unique_ptr<DtrainProcess> worker = cluster.start("worker", 0, flags);
  ASSERT_THAT(worker->wait_for_line("reconnected to ps0"), HasSubstr("reconnected to ps0"));
  const testing::ProcessResult intruder =
      cluster.start("worker", 0, flags, "another secret, also of 32 bytes")->wait();
  EXPECT_NE(intruder.exit_code, 0) << all_output(intruder);

  const std::string page = testing::scrape(urls[0]);
  expect_promtool_accepts(page);
  EXPECT_EQ(relay.frames_tampered(), 1);
  EXPECT_EQ(
      sample(page, R"(dtrain_frames_rejected_total{task="ps0",peer="worker0",reason="bad_tag"})"),
      1.0)
      << page;
  EXPECT_GE(
      sample(page,
             R"(dtrain_frames_rejected_total{task="ps0",peer="127.0.0.1",reason="authentication"})")
          .value_or(0),
      1.0)
      << page;
  // Both ways, every frame whole: at least a push and a pull of softmax's 31,400 bytes a step.
  for (const char* series : {"dtrain_bytes_received_total", "dtrain_bytes_sent_total"}) {
    EXPECT_GT(sample(page, fmt::format(R"({}{{task="ps0",peer="worker0"}})", series)).value_or(0),
              20 * 31400.0)
        << page;
  }
  worker->send_signal(SIGTERM);
  ps->send_signal(SIGTERM);
  worker->wait();
  ps->wait();
}

// Sources without the secret, as many as an attacker has addresses: their refusals cost a few
// series, not one each (comm/transport_counters.h).
TEST(MetricsEndpoint, RefusalsFromManySourcesAreCountedUnderOtherBeyondTheFirstSixteen) {
  testing::HandStartedCluster cluster(1, 1);
  const std::unique_ptr<DtrainProcess> ps = cluster.start(
      "ps", 0, concat(testing::softmax_flags(), {"--train_steps", "100", "--metrics_port", "0"}));
  const std::vector<std::string> urls = metrics_urls(*ps, 1);
  ASSERT_EQ(urls.size(), 1u);
  constexpr int kSources = 40;
  for (int i = 0; i < kSources; ++i) {
    // From 127.0.0.2 on: every address of 127.0.0.0/8 reaches loopback. 64 bytes that are no
    // handshake; the ps closes the connection once it has counted the refusal.
    testing::RawClient client(cluster.ps_port(0), fmt::format("127.0.0.{}", i + 2));
    ASSERT_TRUE(client.connected()) << i;
    ASSERT_TRUE(client.send(std::string(64, 'A')));
    client.read_until_closed(DtrainProcess::kPatience);
    ASSERT_TRUE(client.closed_by_server()) << i;
  }
  const std::string page = testing::scrape(urls[0]);
  expect_promtool_accepts(page);
  const std::vector<Match> series =
      all_matches(page, R"re(dtrain_frames_rejected_total\{task="ps0",peer="([^"]+)",)re"
                        R"re(reason="malformed"\} ([0-9]+))re");
  double total = 0, other = 0;
  for (const Match& m : series) {
    total += std::stod(m[2]);
    if (m[1] == "other") other = std::stod(m[2]);
  }
  EXPECT_EQ(series.size(), 17u) << page;
  EXPECT_EQ(total, kSources) << page;
  EXPECT_EQ(other, kSources - 16) << page;
  ps->send_signal(SIGTERM);
  ps->wait();
}

TEST(MetricsEndpoint, APortTakenIsRefusedNamingTheFlagAndTheAddress) {
  // A port this test holds, listening.
  const int holder = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(holder, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(holder, 1), 0);
  socklen_t length = sizeof address;
  ASSERT_EQ(::getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int port = ntohs(address.sin_port);
  const testing::ProcessResult run = testing::run_dtrain(
      concat({"train", "--metrics_port", std::to_string(port)}, scraped_training(10)));
  ::close(holder);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(all_output(run),
              HasSubstr(fmt::format("--metrics_port {0}: cannot serve the metrics on "
                                    "127.0.0.1:{0}",
                                    port)));
}

}  // namespace
}  // namespace dtrain
