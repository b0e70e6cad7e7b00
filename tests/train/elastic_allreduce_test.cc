// Elastic all-reduce (issue 35) end to end: real dtrain processes under the local launcher, on
// loopback. A killed worker's ring re-forms without it, the survivors going on as the same
// processes; the launcher's restart of it joins the running job with the live workers' state, and
// every worker ends with the same parameters. A SIGTERM is one worker's clean leave; too few
// workers fail the job naming who left. The coordinator's rules alone are tested over sockets in
// tests/cluster/membership_service_test.cc, the data slices in tests/data/batcher_test.cc.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cluster/free_ports.h"
#include "support/elastic_job.h"
#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/tamper_relay.h"
#include "support/temp_dir.h"
#include "support/text_match.h"
#include "support/virtual_network.h"

namespace dtrain {
namespace {

using testing::all_matches;
using testing::all_output;
using testing::concat;
using testing::count_lines_containing;
using testing::DtrainProcess;
using testing::elastic_training;
using ::testing::HasSubstr;
using testing::Match;
using ::testing::Not;
using testing::ProcessResult;
using testing::VirtualNetwork;

constexpr std::string_view kElasticSecret = "elastic test secret, of 32 bytes";

// An elastic all-reduce job (support/elastic_job.h, the sync tests' fixture too).
testing::ElasticJob allreduce_job(int workers, int min_workers, int max_restarts, int steps) {
  return {.strategy = "allreduce",
          .workers = workers,
          .min_workers = min_workers,
          .max_restarts = max_restarts,
          .steps = steps};
}

std::vector<std::string> elastic_job(int workers, int min_workers, int max_restarts, int steps) {
  return allreduce_job(workers, min_workers, max_restarts, steps).launcher_flags();
}

// Waits until worker `index` has logged step `step` (a multiple of 20), then signals it.
void signal_worker_at(DtrainProcess& launcher, int index, int64_t step, int signal) {
  ASSERT_GT(
      testing::ElasticJob{.strategy = "allreduce"}.signal_worker_at(launcher, index, step, signal),
      0);
}

int64_t drawn_step(std::string_view what) {
  return testing::fault_step(what, 2, 10) * 20;  // a step line's step
}

// The chief's run log's "workers" scalars, in the order of its step lines.
std::vector<int> workers_in_run_log(const std::filesystem::path& train_dir) {
  std::vector<int> workers;
  std::istringstream in(testing::read_bytes(train_dir / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json record = nlohmann::json::parse(line);
    if (record.contains("workers")) workers.push_back(record.at("workers").get<int>());
  }
  return workers;
}

TEST(ElasticAllreduce, AKilledWorkerLeavesTheRingAndItsRestartRejoinsTheRunningJob) {
  testing::TempDir train_dir;
  DtrainProcess launcher(
      concat(elastic_job(3, 2, 1, 1500), {"--train_dir", train_dir.path().string()}));
  const int64_t kill_at = drawn_step("elastic worker 1 killed at global step");
  signal_worker_at(launcher, 1, kill_at, SIGKILL);
  const ProcessResult r = launcher.wait();
  ASSERT_EQ(r.exit_code, 0) << all_output(r);

  // The survivors went on as the same processes: each started once, and saw worker1 go.
  for (const int survivor : {0, 2}) {
    const std::string prefix = fmt::format("[worker{}] worker{}: ", survivor, survivor);
    EXPECT_EQ(count_lines_containing(r.out, prefix + "allreduce training of softmax"), 1) << r.out;
    // The kernel closes a killed process's connection, or resets it if data was still unread.
    const std::string lost = fmt::format(
        R"(\[worker{0}\] worker{0}: worker1 was lost at step [0-9]+ \(its connection to the )"
        R"(coordinator (closed: the process ended|failed: .*reset by peer)\): 2 workers now)",
        survivor);
    EXPECT_EQ(all_matches(r.out, lost).size(), 1u) << r.out;
  }
  // The launcher started worker1 alone again, and it joined: every worker says so.
  EXPECT_EQ(count_lines_containing(r.out, "[launcher] worker1 was killed by signal 9"), 1);
  EXPECT_EQ(count_lines_containing(r.out, "[worker1] worker1: allreduce training of softmax"), 2);
  for (const int worker : {0, 1, 2}) {
    EXPECT_EQ(
        count_lines_containing(
            r.out, fmt::format("[worker{}] worker{}: worker1 joined at step ", worker, worker)),
        1)
        << r.out;
  }
  // Every worker ends at the same parameters, the rejoined one too.
  const std::map<int, std::string> crcs = testing::parameter_crcs(r.out);
  ASSERT_EQ(crcs.size(), 3u) << r.out;
  EXPECT_EQ(crcs.at(0), crcs.at(1));
  EXPECT_EQ(crcs.at(0), crcs.at(2));
  EXPECT_THAT(r.out, HasSubstr("1 worker(s) left, 1 joined"));
  // The chief's scalar "workers" (TensorBoard's too) went 3, then 2, then 3 again — unless the
  // restarted worker asked to join before the ring of the two survivors formed, so that they
  // never trained as two.
  std::vector<int> workers = workers_in_run_log(train_dir.path());
  workers.erase(std::unique(workers.begin(), workers.end()), workers.end());
  const bool trained_as_two =
      count_lines_containing(r.out, "[worker0] worker0: membership view 2: rank 0 of 2 ") == 1 &&
      count_lines_containing(r.out, "[worker0] worker0: the ring of membership view 2 did not") ==
          0;
  if (trained_as_two) {
    EXPECT_THAT(workers, ::testing::ElementsAre(3, 2, 3)) << r.out;
  } else {
    EXPECT_THAT(workers, ::testing::ElementsAre(3)) << r.out;
  }
}

// Two workers, one killed: the survivor trains on as a view of one member, which has no ring for
// a change to interrupt and so looks for one at every step; the launcher's restart of the killed
// worker joins it there, rather than waiting out --collective_timeout and forming a job of its
// own (two chiefs writing one --train_dir, two parameter sets at the end). Either worker.
void kill_one_of_two(int killed) {
  testing::TempDir train_dir;
  DtrainProcess launcher(
      concat(elastic_job(2, 1, 1, 3000), {"--train_dir", train_dir.path().string()}));
  signal_worker_at(launcher, killed,
                   drawn_step(fmt::format("worker {} of 2 killed at global step", killed)),
                   SIGKILL);
  const ProcessResult r = launcher.wait();
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  const int survivor = 1 - killed;
  EXPECT_EQ(count_lines_containing(
                r.out, fmt::format("[launcher] worker{} was killed by signal 9", killed)),
            1)
      << r.out;
  EXPECT_EQ(count_lines_containing(r.out, fmt::format("[worker{0}] worker{0}: worker{1} joined at "
                                                      "step ",
                                                      survivor, killed)),
            1)
      << r.out;
  // One job: one chief at the end, and one parameter set on both workers.
  EXPECT_EQ(count_lines_containing(r.out, "aggregate: 3000 global steps"), 1) << r.out;
  const std::map<int, std::string> crcs = testing::parameter_crcs(r.out);
  ASSERT_EQ(crcs.size(), 2u) << r.out;
  EXPECT_EQ(crcs.at(0), crcs.at(1)) << r.out;
}

TEST(ElasticAllreduce, OfTwoWorkersAKilledWorker1RejoinsTheSurvivorAndOneParameterSetEnds) {
  kill_one_of_two(1);
}

TEST(ElasticAllreduce, OfTwoWorkersAKilledChiefRejoinsTheSurvivorAndOneParameterSetEnds) {
  kill_one_of_two(0);
}

// Killed 20 steps before the end, worker1 is started again while the survivor finishes: it
// comes too late, which is no failure of the run.
TEST(ElasticAllreduce, ARestartThatComesAfterTheEndSaysItCameTooLateAndTheRunSucceeds) {
  DtrainProcess launcher(elastic_job(2, 1, 1, 600));
  signal_worker_at(launcher, 1, 580, SIGKILL);
  const ProcessResult r = launcher.wait();
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  EXPECT_EQ(count_lines_containing(r.out, "[launcher] worker1 was killed by signal 9"), 1) << r.out;
  EXPECT_EQ(count_lines_containing(r.out,
                                   "[worker1] worker1: worker1 came too late to join: the "
                                   "job finished at step 600 (worker0 reached the end of "
                                   "its training); nothing is left to do"),
            1)
      << r.out;
  EXPECT_EQ(testing::parameter_crcs(r.out).size(), 1u) << r.out;
}

// A relay on the joiner's link to the coordinator forges the view it is sent. The frame's tag
// catches it, and the joiner says so at once (not "no membership view within 70 s"); the members,
// whose view held the joiner, re-form without it as soon as it is gone, and finish alike.
TEST(ElasticAllreduce, AForgedFrameOnAJoinersLinkIsCaughtAndSaidAndTheJobGoesOn) {
  testing::TempDir dir;
  const std::string secret_file = testing::write_secret_file(dir, kElasticSecret);
  DtrainProcess launcher(
      concat(elastic_job(2, 1, 0, 3000), {"--max_workers", "3", "--secret_file", secret_file}));
  const std::vector<Match> at = all_matches(launcher.wait_for_line("its coordinator at"),
                                            R"(its coordinator at [0-9.]+:([0-9]+))");
  ASSERT_EQ(at.size(), 1u);
  testing::TamperRelay relay(static_cast<uint16_t>(std::stoi(at[0][1])),
                             testing::Attack::kForgeMembershipView);
  ASSERT_THAT(launcher.wait_for_line("[worker0] worker=0, epoch=0, global_step=100,"),
              HasSubstr("global_step=100,"));
  DtrainProcess joiner(concat({"task", "--join", fmt::format("127.0.0.1:{}", relay.port()),
                               "--task_index", "2", "--secret_file", secret_file},
                              elastic_training(3000)));
  const ProcessResult joined = joiner.wait();
  const ProcessResult r = launcher.wait();
  EXPECT_EQ(relay.frames_tampered(), 1);
  EXPECT_EQ(joined.exit_code, 1) << all_output(joined);
  EXPECT_THAT(
      all_output(joined),
      ::testing::ContainsRegex(R"(lost the job's coordinator: frame [0-9]+ from the job's )"
                               R"(coordinator \(127\.0\.0\.1:[0-9]+\) failed authentication)"));
  EXPECT_THAT(all_output(joined), Not(HasSubstr("no membership view")));
  EXPECT_THAT(all_output(joined), Not(HasSubstr("\x1b")));
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  const std::map<int, std::string> crcs = testing::parameter_crcs(r.out);
  ASSERT_EQ(crcs.size(), 2u) << r.out;
  EXPECT_EQ(crcs.at(0), crcs.at(1));
}

// ---- every example once per epoch, across a loss and a join ----

constexpr const char* kIdModel = R"({"class_name": "Sequential", "config": {"name": "ids",
  "layers": [{"class_name": "InputLayer", "config": {"batch_input_shape": [null, 3], "name": "in"}},
             {"class_name": "Dense", "config": {"name": "out", "units": 3}}]}})";

// Example i's first feature is i, so that a worker's record of its batches names the examples.
std::string id_rows(int count) {
  std::string rows = "id,f1,f2,label\n";
  for (int i = 0; i < count; ++i) rows += fmt::format("{},{},{},{}\n", i, i % 7, i % 5, i % 3);
  return rows;
}

struct StepRecord {
  int64_t step = 0;
  int64_t epoch = 0;
  std::vector<int64_t> ids;
};

std::vector<StepRecord> read_examples_record(const std::filesystem::path& path) {
  std::vector<StepRecord> records;
  std::istringstream in(testing::read_bytes(path));
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    StepRecord r;
    fields >> r.step >> r.epoch;
    for (double id; fields >> id;) r.ids.push_back(static_cast<int64_t>(id));
    records.push_back(std::move(r));
  }
  return records;
}

// Trains a job of 3 workers on examples that name themselves, kills worker1, and checks from
// every worker's record of its batches that each epoch took each example at most once, leaving
// out no more than a global batch. Each worker's batch fixed: the launcher restarts worker1, which
// joins again. `global` (--elastic_batch global): worker1 stays away, and every step of the two
// left still takes the job's global batch, in slices of 15 rather than 10.
void count_examples_across_changes(bool global) {
  testing::TempDir dir;
  const int examples = 600, batch = 10;
  testing::write_bytes(dir / "train.csv", id_rows(examples));
  testing::write_bytes(dir / "test.csv", id_rows(30));
  testing::write_bytes(dir / "model.json", kIdModel);
  DtrainProcess launcher({"train",
                          "--strategy",
                          "allreduce",
                          "--workers",
                          "3",
                          "--min_workers",
                          "2",
                          "--max_restarts",
                          global ? "0" : "1",
                          "--model",
                          (dir / "model.json").string(),
                          "--train_data",
                          (dir / "train.csv").string(),
                          "--test_data",
                          (dir / "test.csv").string(),
                          "--validation_size",
                          "0",
                          "--batch_size",
                          std::to_string(batch),
                          "--train_steps",
                          "500",
                          "--threads",
                          "1",
                          "--log_every",
                          "20",
                          "--step_delay_ms",
                          "4",
                          "--record_examples",
                          (dir / "examples").string(),
                          "--elastic_batch",
                          global ? "global" : "worker"});
  signal_worker_at(launcher, 1, drawn_step("elastic worker 1 killed while its examples counted"),
                   SIGKILL);
  const ProcessResult r = launcher.wait();
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  // The step the job went on from: worker1's records after it are of a step the others dropped.
  const std::vector<Match> lost =
      all_matches(r.out, R"(\[worker0\] worker0: worker1 was lost at step ([0-9]+) )");
  ASSERT_EQ(lost.size(), 1u) << r.out;
  const int64_t went_on_from = std::stoll(lost[0][1]);
  if (!global) {
    EXPECT_THAT(r.out, HasSubstr("worker1 joined at step"));
  }

  std::map<int64_t, std::vector<int64_t>> per_epoch;  // epoch -> ids trained on
  std::map<int64_t, int> records_per_step;
  std::map<int64_t, size_t> examples_per_step;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    if (!entry.path().filename().string().starts_with("examples.worker")) continue;
    ++files;
    const std::vector<StepRecord> records = read_examples_record(entry.path());
    ASSERT_FALSE(records.empty()) << entry.path();
    // The killed worker1 (its file starts at step 1): a record after the step the others went on
    // from is of a step they dropped.
    const bool killed = entry.path().filename().string().starts_with("examples.worker1.") &&
                        records.front().step == 1;
    for (const StepRecord& record : records) {
      // A kept global batch of 30 is 10 a worker for three, 15 for two.
      if (global) {
        ASSERT_THAT(record.ids.size(), ::testing::AnyOf(10u, 15u)) << "step " << record.step;
      } else {
        ASSERT_EQ(record.ids.size(), static_cast<size_t>(batch));
      }
      if (killed && record.step > went_on_from) continue;
      ++records_per_step[record.step];
      examples_per_step[record.step] += record.ids.size();
      auto& ids = per_epoch[record.epoch];
      ids.insert(ids.end(), record.ids.begin(), record.ids.end());
    }
  }
  EXPECT_EQ(files, global ? 3 : 4) << "workers 0 and 2, and worker1 (twice, restarted)";
  for (int64_t step = 1; step <= 500; ++step) {
    if (global) {
      EXPECT_EQ(records_per_step[step], step <= went_on_from ? 3 : 2) << "step " << step;
      EXPECT_EQ(examples_per_step[step], 3u * batch) << "step " << step;
    } else {
      EXPECT_GE(records_per_step[step], 2) << "step " << step;
      EXPECT_LE(records_per_step[step], 3) << "step " << step;
    }
  }
  ASSERT_GE(per_epoch.size(), 5u);
  for (const auto& [epoch, ids] : per_epoch) {
    const std::set<int64_t> distinct(ids.begin(), ids.end());
    EXPECT_EQ(distinct.size(), ids.size()) << "an example trained on twice in epoch " << epoch;
    if (epoch == per_epoch.rbegin()->first) continue;  // the run ended inside it
    // What no whole global batch could take is the most an epoch leaves out.
    EXPECT_GT(static_cast<int64_t>(ids.size()), examples - 3 * batch) << "epoch " << epoch;
  }
}

TEST(ElasticAllreduce, EveryEpochTrainsOnEachExampleOnceAcrossALossAndAJoin) {
  count_examples_across_changes(/*global=*/false);
}

TEST(ElasticAllreduce, AKeptGlobalBatchIsSplitOverTheWorkersThereAreAndEachExampleTakenOnce) {
  count_examples_across_changes(/*global=*/true);
}

TEST(ElasticAllreduce, AFourthWorkerStartedByHandJoinsTheRunningJob) {
  testing::TempDir dir;
  const std::string secret_file = testing::write_secret_file(dir, kElasticSecret);
  DtrainProcess launcher(
      concat(elastic_job(3, 2, 0, 2000), {"--max_workers", "4", "--secret_file", secret_file}));
  const std::vector<Match> at = all_matches(launcher.wait_for_line("its coordinator at"),
                                            R"(its coordinator at ([0-9.]+:[0-9]+))");
  ASSERT_EQ(at.size(), 1u);
  // Mid-run: once worker0 has logged its step 100.
  ASSERT_THAT(launcher.wait_for_line("[worker0] worker=0, epoch=0, global_step=100,"),
              HasSubstr("global_step=100,"));
  // The job's training flags, its secret, and a number of its own; no cluster flags.
  DtrainProcess joiner(
      concat({"task", "--join", at[0][1], "--task_index", "3", "--secret_file", secret_file},
             elastic_training(2000)));
  const ProcessResult joined = joiner.wait();
  const ProcessResult r = launcher.wait();
  ASSERT_EQ(joined.exit_code, 0) << all_output(joined);
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  EXPECT_THAT(joined.out, HasSubstr("worker3: joining the elastic job whose coordinator is at " +
                                    at[0][1] + " (--join), listening on 127.0.0.1:"));
  const std::vector<Match> lines =
      all_matches(joined.out, R"(worker3: worker3 joined at step ([0-9]+): 4 workers now)");
  ASSERT_EQ(lines.size(), 1u) << joined.out;
  for (const int worker : {0, 1, 2}) {
    EXPECT_EQ(count_lines_containing(
                  r.out, fmt::format("[worker{0}] worker{0}: worker3 joined at step {1}: 4 workers "
                                     "now",
                                     worker, lines[0][1])),
              1)
        << r.out;
  }
  std::map<int, std::string> crcs = testing::parameter_crcs(r.out);
  const std::map<int, std::string> joiner_crc = testing::parameter_crcs(joined.out);
  ASSERT_EQ(joiner_crc.size(), 1u) << joined.out;
  crcs.insert(joiner_crc.begin(), joiner_crc.end());
  ASSERT_EQ(crcs.size(), 4u) << r.out;
  for (const auto& [worker, crc] : crcs) EXPECT_EQ(crc, crcs.at(0)) << "worker " << worker;
  EXPECT_THAT(r.out, HasSubstr("aggregate: 2000 global steps"));
  EXPECT_THAT(r.out, HasSubstr("over 4 workers"));
}

TEST(ElasticAllreduce, ASigtermIsOneWorkersCleanLeave) {
  DtrainProcess launcher(elastic_job(3, 2, 0, 600));
  signal_worker_at(launcher, 2, drawn_step("elastic worker 2 stopped at global step"), SIGTERM);
  const ProcessResult r = launcher.wait();
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  const std::vector<Match> left =
      all_matches(r.out, R"(\[worker2\] worker=2: left the job at global step ([0-9]+) after)");
  ASSERT_EQ(left.size(), 1u) << r.out;
  // The others heard it at that very step, and finished without it, alike.
  for (const int survivor : {0, 1}) {
    EXPECT_EQ(count_lines_containing(
                  r.out, fmt::format("[worker{}] worker{}: worker2 left at step {} (SIGTERM): 2 "
                                     "workers now",
                                     survivor, survivor, left[0][1])),
              1)
        << r.out;
  }
  EXPECT_EQ(count_lines_containing(r.out, "[launcher]"), 0) << r.out;  // nothing restarted
  const std::map<int, std::string> crcs = testing::parameter_crcs(r.out);
  ASSERT_EQ(crcs.size(), 2u) << r.out;
  EXPECT_EQ(crcs.at(0), crcs.at(1));
}

TEST(ElasticAllreduce, TooFewWorkersFailTheJobNamingWhoLeft) {
  DtrainProcess launcher(elastic_job(3, 3, 0, 100000));
  signal_worker_at(launcher, 1, drawn_step("elastic worker 1 killed below the minimum at step"),
                   SIGKILL);
  const ProcessResult r = launcher.wait();
  EXPECT_NE(r.exit_code, 0) << all_output(r);
  EXPECT_GE(all_matches(r.out + r.err, R"(worker1 was lost at step [0-9]+ \(its connection to )"
                                       R"(the coordinator .*\): 2 worker\(s\) remain, fewer )"
                                       R"(than --min_workers 3)")
                .size(),
            1u)
      << all_output(r);
}

// ---- under a launcher's ranks (torchrun-style variables): rank 0 hosts the coordinator ----

// Three ranks of an elastic job given what torchrun gives (on `net`'s hosts when given); rank 2
// is SIGKILLed at a step, and ranks 0 and 1 must finish alike without it.
void kill_one_of_three_ranks(const VirtualNetwork* net) {
  const uint16_t port = net != nullptr ? 29500 : pick_free_ports(1)[0];
  const std::string master = net != nullptr ? net->address(0) : "127.0.0.1";
  std::vector<std::unique_ptr<DtrainProcess>> ranks;
  for (int r = 0; r < 3; ++r) {
    DtrainProcess::Options options;
    if (net != nullptr) options.prefix = net->run_on(r);
    options.extra_env = testing::launcher_rank_env(r, 3, master, port, kElasticSecret);
    ranks.push_back(std::make_unique<DtrainProcess>(
        std::vector<std::string>{"task", "--strategy", "allreduce", "--min_workers", "2", "--model",
                                 "softmax", "--threads", "1", "--data_dir",
                                 testing::mnist_dir().string(), "--train_steps", "600",
                                 "--log_every", "20", "--step_delay_ms", "2"},
        options));
  }
  const int64_t kill_at = drawn_step("elastic rank 2 killed at global step");
  ASSERT_THAT(ranks[2]->wait_for_line(fmt::format("global_step={},", kill_at)),
              HasSubstr("worker=2"));
  ranks[2]->send_signal(SIGKILL);
  EXPECT_EQ(ranks[2]->wait().signal, SIGKILL);
  std::vector<std::string> crcs;
  for (const int r : {0, 1}) {
    const ProcessResult result = ranks[static_cast<size_t>(r)]->wait();
    ASSERT_EQ(result.exit_code, 0) << all_output(result);
    EXPECT_EQ(all_matches(result.out, fmt::format(R"(worker{}: worker2 was lost at step [0-9]+ )"
                                                  R"(\(.*\): 2 workers now)",
                                                  r))
                  .size(),
              1u)
        << result.out;
    const std::map<int, std::string> crc = testing::parameter_crcs(result.out);
    ASSERT_EQ(crc.size(), 1u) << result.out;
    crcs.push_back(crc.begin()->second);
  }
  EXPECT_EQ(crcs[0], crcs[1]);
}

TEST(ElasticAllreduce, UnderTorchrunStyleVariablesAKilledRankLeavesAndTheOthersFinishAlike) {
  kill_one_of_three_ranks(nullptr);
}

TEST(ElasticAllreduce, OnThreeHostsAKilledRankLeavesAndTheOthersFinishAlike) {
  if (const auto why = VirtualNetwork::unavailable()) GTEST_SKIP() << *why;
  const VirtualNetwork net(3);
  kill_one_of_three_ranks(&net);
}

}  // namespace
}  // namespace dtrain
