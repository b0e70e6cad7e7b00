// How the ps client and service get through a ps or a worker that is not there, in one process
// over loopback: a wait for a ps says so while it lasts and gives up with one duration; a ps that
// came back without a checkpoint is re-seeded from the chief's copy and the others wait for that;
// and a ps whose workers all said they failed ends at once, naming each.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>
#include <future>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "base/error.h"
#include "comm/loopback.h"
#include "ps/ps_client.h"
#include "ps/ps_lane.h"
#include "ps/ps_service.h"

namespace dtrain {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using testing::kLoopbackSecret;

std::vector<ParamSpec> specs() { return {ParamSpec{"w", {16, 10}}, ParamSpec{"b", {10}}}; }

PartitionMap one_ps_map() {
  return make_partition(ParamSet(specs()), 1, Placement::kBalanced, 64 * 1024, 1 << 20);
}

PsServiceOptions service_options(const PartitionMap& map, int workers, uint16_t port = 0) {
  PsServiceOptions o;
  o.specs = specs();
  o.map = map;
  o.sync = SyncOptions{.sync_replicas = false, .total_num_replicas = workers};
  o.server = testing::loopback_options();
  o.server.port = port;
  o.worker_timeout_ms = 5'000;
  return o;
}

PsClientOptions client_options(uint16_t port, int worker, std::vector<std::string>* lines) {
  PsClientOptions o;
  o.ps.push_back(HostPort{"127.0.0.1", port});
  o.secret = std::string(kLoopbackSecret);
  o.connection = testing::client_options();
  o.worker = worker;
  if (lines != nullptr) o.report = [lines](const std::string& line) { lines->push_back(line); };
  return o;
}

void fill(ParamSet& set, float value) {
  for (float& v : set.flat()) v = value;
}

// Durations ("0.8 s", "12 s") in a message.
size_t durations_in(const std::string& text) {
  const std::regex duration(R"([0-9.]+ s\b)");
  return static_cast<size_t>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), duration), {}));
}

TEST(PsRecovery, AWaitForAMissingPsSaysWhomWhereAndWhyAndGivesUpWithOneDuration) {
  const uint16_t port = testing::free_port();
  std::vector<std::string> lines;
  PsClientOptions options = client_options(port, 0, &lines);
  options.connection.connect_timeout_ms = 800;
  options.connection.wait_report_interval_ms = 100;
  const PartitionMap map = one_ps_map();
  std::string error;
  try {
    PsClient client(ParamSet(specs()), map, options);
  } catch (const TransportError& e) {
    error = e.what();
  }
  const std::string address = fmt::format("127.0.0.1:{}", port);
  EXPECT_THAT(lines, Contains(HasSubstr(fmt::format(
                         "still waiting for ps0 at {} (Connection refused); ", address))));
  EXPECT_THAT(lines, Contains(::testing::ContainsRegex("[0-9]+ s left$")));
  EXPECT_THAT(error,
              HasSubstr(fmt::format("could not connect to ps0 at {} within 0.8 s (", address)));
  EXPECT_THAT(error, HasSubstr("attempts): Connection refused"));
  EXPECT_EQ(durations_in(error), 1u) << error;
}

// A worker waits for all its ps tasks within one --peer_timeout: the ps it tries last gets what
// the earlier ones left of it, and its give-up line still states the span the user set, not that
// remainder (once "within 0.9 s" for --peer_timeout 1, on a loaded machine).
TEST(PsRecovery, AWaitSharedWithEarlierPsTasksStatesTheWholeTimeout) {
  const uint16_t port = testing::free_port();
  PsClientOptions options = client_options(port, 0, nullptr);
  options.connection.connect_timeout_ms = 1'000;
  // As if reaching the ps tasks before this one had taken 0.7 s of the second.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  std::string error;
  try {
    connect_to_ps_retrying(options, 0, deadline);
  } catch (const TransportError& e) {
    error = e.what();
  }
  EXPECT_THAT(
      error, HasSubstr(fmt::format("could not connect to ps0 at 127.0.0.1:{} within 1 s (", port)));
  EXPECT_EQ(durations_in(error), 1u) << error;
}

TEST(PsRecovery, AStopRequestEndsTheWaitForAPs) {
  const uint16_t port = testing::free_port();
  StopRequest stop;
  PsClientOptions options = client_options(port, 1, nullptr);
  options.connection.connect_timeout_ms = 5'000;
  options.connection.wait_report_interval_ms = 50;
  options.connection.stop = &stop;
  // The signal comes while the client waits: at its first line.
  options.report = [&stop](const std::string&) { stop.request(SIGTERM); };
  const PartitionMap map = one_ps_map();
  EXPECT_THAT([&] { PsClient client(ParamSet(specs()), map, options); },
              ::testing::ThrowsMessage<StopRequested>(HasSubstr(
                  fmt::format("stopped by SIGTERM while waiting for ps0 at 127.0.0.1:{}", port))));
}

// A ps killed and started again without a checkpoint to restore (--save_steps 0, the default):
// the chief puts back the values it was last sent, and the run goes on from them.
TEST(PsRecovery, APsThatCameBackEmptyIsReseededFromTheChiefsCopyWhileTheOthersWait) {
  const PartitionMap map = one_ps_map();
  auto ps = std::make_unique<PsService>(service_options(map, 2));
  const uint16_t port = ps->port();
  ParamSet chief_params(specs()), other_params(specs()), grads(specs());
  fill(chief_params, 0.5f);
  fill(grads, 1.0f);
  std::vector<std::string> chief_lines, other_lines;
  PsClientOptions chief_options = client_options(port, 0, &chief_lines);
  chief_options.reseed_from = &chief_params;
  PsClient chief(chief_params, map, chief_options);
  PsClient other(other_params, map, client_options(port, 1, &other_lines));
  chief.initialize(chief_params, {}, 0);
  for (int i = 0; i < 3; ++i) chief.push_pull(grads, chief_params, 0.1f);
  other.push_pull(grads, other_params, 0.1f);  // step 4, which the chief has not seen
  ASSERT_EQ(chief.global_step(), 3);
  ASSERT_FLOAT_EQ(chief_params.values(0)[0], 0.2f);

  ps.reset();
  ps = std::make_unique<PsService>(service_options(map, 2, port));
  ASSERT_FALSE(ps->store().initialized());
  // The other worker reaches the empty ps before the chief (and waits there for it) or after it;
  // either way it reports the step it lost.
  auto other_push = std::async(std::launch::async, [&] { other.pull(other_params); });
  chief.push_pull(grads, chief_params, 0.1f);
  other_push.get();

  EXPECT_THAT(chief_lines,
              Contains(HasSubstr("ps0 restarted without a checkpoint: re-seeded from worker0's "
                                 "copy at step 3 (updates from other workers since then are "
                                 "lost")));
  EXPECT_EQ(chief.global_step(), 4);
  // The other worker lost its own step 4: the ps went back to step 3.
  EXPECT_THAT(other_lines, Contains(HasSubstr("restored at global step 3: the 1 step after that "
                                              "is lost")));
  // What the chief pushed at step 4 went onto its copy: 0.5 - 4 x 0.1 by SGD.
  for (size_t v = 0; v < chief_params.count(); ++v) {
    for (const float value : chief_params.values(v)) ASSERT_FLOAT_EQ(value, 0.1f) << v;
  }
}

// A ps waits for a worker that lost its connection (it may come back) but not for one that said
// it failed: once every worker has, it ends, naming each and why.
TEST(PsRecovery, APsWhoseWorkersAllFailedEndsNamingEach) {
  const PartitionMap map = one_ps_map();
  PsServiceOptions options = service_options(map, 2);
  options.worker_timeout_ms = 30'000;
  PsService ps(options);
  ParamSet params(specs());
  PsClient chief(params, map, client_options(ps.port(), 0, nullptr));
  chief.initialize(params, {}, 0);
  PsClient other(params, map, client_options(ps.port(), 1, nullptr));
  chief.report_failure("--train_data: no such file");
  other.report_failure("out of memory");
  EXPECT_THAT([&] { ps.run(); },
              ::testing::ThrowsMessage<Error>(::testing::AllOf(
                  HasSubstr("ps0: every worker ended before training finished, at step 0"),
                  HasSubstr("worker 0 failed: --train_data: no such file"),
                  HasSubstr("worker 1 failed: out of memory"))));
}

// The default logger for a test's lifetime: keeps the first line holding `needle` and then asks
// `stop` to stop, which ends a ps's run() once no worker is connected.
class StopAtLine : public spdlog::sinks::base_sink<std::mutex> {
 public:
  StopAtLine(std::string needle, StopRequest& stop) : needle_(std::move(needle)), stop_(stop) {}
  std::string line() {
    std::lock_guard lock(mutex_);
    return line_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const std::string text(msg.payload.begin(), msg.payload.end());
    if (line_.empty() && text.find(needle_) != std::string::npos) {
      line_ = text;
      stop_.request(SIGTERM);
    }
  }
  void flush_() override {}

 private:
  const std::string needle_;
  StopRequest& stop_;
  std::string line_;  // guarded by base_sink's mutex_
};

TEST(PsRecovery, APsSaysWhichWorkersItStillWaitsForAndForHowLong) {
  StopRequest stop;
  const auto sink = std::make_shared<StopAtLine>("worker 0 (lost from 127.0.0.1:", stop);
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  {
    const PartitionMap map = one_ps_map();
    PsServiceOptions options = service_options(map, 2);
    options.worker_timeout_ms = 30'000;
    options.wait_report_interval_ms = 50;
    options.stop = &stop;
    PsService ps(options);
    {
      ParamSet params(specs());
      PsClient chief(params, map, client_options(ps.port(), 0, nullptr));
    }
    // Only the line asked for ends the run: a hang, not a pass, where it never comes.
    auto run = std::async(std::launch::async, [&] { ps.run(); });
    if (run.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      stop.request(SIGTERM);
      run.get();
      spdlog::set_default_logger(previous);
      FAIL() << "the ps never said it waits for the lost worker 0";
    }
    run.get();
  }
  spdlog::set_default_logger(previous);
  EXPECT_THAT(sink->line(),
              ::testing::ContainsRegex(
                  "^ps0: still waiting for worker 0 \\(lost from 127\\.0\\.0\\.1:[0-9]+; "
                  "[0-9]+ s left\\), worker 1 \\(not connected yet\\)$"));
}

// A worker of another model is refused at its hello; the ps's waits then say so, with where it
// came from, not that the worker has not connected yet.
TEST(PsRecovery, AWorkerItRefusedIsNamedAsRefusedInItsWaitsNotAsNotConnectedYet) {
  StopRequest stop;
  const auto sink = std::make_shared<StopAtLine>("still waiting for", stop);
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  std::string refusal;
  {
    const PartitionMap map = one_ps_map();
    PsServiceOptions options = service_options(map, 1);
    options.wait_report_interval_ms = 50;
    options.stop = &stop;
    PsService ps(options);
    const std::vector<ParamSpec> other = {ParamSpec{"w", {16, 12}}, ParamSpec{"b", {12}}};
    const ParamSet params(other);
    const PartitionMap other_map =
        make_partition(params, 1, Placement::kBalanced, 64 * 1024, 1 << 20);
    PsClientOptions client = client_options(ps.port(), 0, nullptr);
    client.connection.connect_timeout_ms = 2'000;
    try {
      PsClient worker(params, other_map, client);
    } catch (const Error& error) {
      refusal = error.what();
    }
    auto run = std::async(std::launch::async, [&] { ps.run(); });
    if (run.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      stop.request(SIGTERM);
      run.get();
      spdlog::set_default_logger(previous);
      FAIL() << "the ps never said whom it waits for";
    }
    run.get();
  }
  spdlog::set_default_logger(previous);
  EXPECT_THAT(refusal, HasSubstr("another model or partition"));
  EXPECT_THAT(sink->line(), ::testing::ContainsRegex(
                                "^ps0: still waiting for worker 0 \\(refused: its hello from "
                                "127\\.0\\.0\\.1:[0-9]+ had another model or partition than "
                                "this ps task\\)$"));
}

}  // namespace
}  // namespace dtrain
