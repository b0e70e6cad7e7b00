// The ps strategy in one process: a ps task (PsTaskServer) and two PsStrategy workers as threads
// over loopback connections, with the real handshake and protocol, payloads by value over TCP or
// by reference through memory (the link step goes by reference within one process too), each
// worker running the training loop as the run plan's composition root (plan/run.h) does. Sync
// training of W workers on batch B is local training on batch W·B (DESIGN.md §5), every worker
// ends with the ps's values, and those are the values `dtrain train --strategy sync` ends with in
// processes.
#include "train/ps_strategy.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <exception>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/stop_request.h"
#include "plan/recipes.h"
#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/temp_dir.h"
#include "support/text_match.h"
#include "tensor/blas.h"
#include "train/local_strategy.h"
#include "train/ps_task_server.h"
#include "train/training_input.h"
#include "train/training_loop.h"
#include "train/training_state.h"

namespace dtrain {
namespace {

constexpr int kFeatures = 8;
constexpr int kClasses = 3;

// Rows of kFeatures values in [0, 1) and a label: the feature of the largest value among the first
// kClasses, so that a softmax learns it in a few steps.
void write_examples(const std::filesystem::path& path, int rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(0.0f, 1.0f);
  std::string text;
  for (int f = 0; f < kFeatures; ++f) text += fmt::format("f{},", f);
  text += "label\n";
  for (int r = 0; r < rows; ++r) {
    std::vector<float> x(kFeatures);
    for (float& v : x) {
      v = value(rng);
      text += fmt::format("{},", v);
    }
    text += fmt::format("{}\n", std::max_element(x.begin(), x.begin() + kClasses) - x.begin());
  }
  testing::write_bytes(path, text);
}

constexpr const char* kModel = R"({"class_name": "Sequential", "config": {"name": "tiny",
  "layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 8], "name": "in"}},
  {"class_name": "Dense", "config": {"name": "out", "units": 3, "activation": "softmax"}}]}})";

// What one task printed, and the parameters a worker ended with.
struct TaskRun {
  std::ostringstream out;
  std::vector<float> params;
  std::exception_ptr error;
};

class PsStrategyInOneProcess : public ::testing::TestWithParam<Transport> {
 protected:
  PsStrategyInOneProcess() {
    blas_set_threads(1);
    testing::write_bytes(dir_ / "model.json", kModel);
    write_examples(dir_ / "train.csv", 240, 1);
    write_examples(dir_ / "test.csv", 60, 2);
  }

  // What the CLI makes of flags(batch_size): the model's recipe, and a user's files trained on
  // whole.
  TrainConfig train_config(int batch_size) const {
    TrainConfig c = recipe_for((dir_ / "model.json").string());
    c.model.name = (dir_ / "model.json").string();
    c.train_data = (dir_ / "train.csv").string();
    c.test_data = (dir_ / "test.csv").string();
    c.batch_size = batch_size;
    c.train_steps = kSteps;
    c.learning_rate = 0.5f;
    c.log_every = 0;
    c.validation_size = 0;
    return c;
  }

  std::vector<std::string> flags(int batch_size) const {
    return {"--model",         (dir_ / "model.json").string(),
            "--train_data",    (dir_ / "train.csv").string(),
            "--test_data",     (dir_ / "test.csv").string(),
            "--batch_size",    std::to_string(batch_size),
            "--train_steps",   std::to_string(kSteps),
            "--learning_rate", "0.5",
            "--threads",       "1",
            "--log_every",     "0"};
  }

  // A cluster of one ps at `ps_port` and two workers, as task `job` `index` sees it. The workers'
  // addresses are never listened on: in the ps strategies only the ps tasks serve.
  static PsClusterConfig cluster_config(uint16_t ps_port, const char* job, int index,
                                        Transport transport) {
    PsClusterConfig c;
    c.cluster.cluster = ClusterSpec(
        {{"ps", {HostPort{"127.0.0.1", ps_port}}},
         {"worker", {HostPort{"127.0.0.1", kUnusedPort}, HostPort{"127.0.0.1", kUnusedPort + 1}}}});
    c.cluster.task = TaskId{job, index};
    c.cluster.bind_host = "127.0.0.1";
    c.secret = "the cluster secret of this test";
    c.sync.sync_replicas = true;
    c.sync.total_num_replicas = 2;
    c.sync.replicas_to_aggregate = 2;
    c.transport = transport;
    // A worker that fails ends the test soon rather than after the default minute.
    c.worker_timeout_ms = 5'000;
    c.peer_timeout_ms = 30'000;
    return c;
  }

  // One sync run: the ps task and both workers in threads, each worker's loop as plan/run.h
  // runs it.
  void run_sync_cluster(int batch_size) {
    const TrainConfig train = train_config(batch_size);
    // A worker that fails stops the ps, which would otherwise wait for it.
    TrainConfig ps_train = train;
    ps_train.stop = &worker_failed_;
    const PsClusterConfig ps_config = cluster_config(0, "ps", 0, GetParam());
    PsTaskServer server(ps_train, ps_config, ps_.out);
    const PsClusterConfig worker_config[] = {
        cluster_config(server.port(), "worker", 0, GetParam()),
        cluster_config(server.port(), "worker", 1, GetParam())};
    {
      std::jthread ps_thread([&] {
        try {
          server.serve();
        } catch (...) {
          ps_.error = std::current_exception();
        }
      });
      std::vector<std::jthread> worker_threads;
      for (int w = 0; w < 2; ++w) {
        worker_threads.emplace_back([&, w] {
          TaskRun& run = workers_[w];
          try {
            const TrainingInput input(train);
            TrainingState state(train);
            PsStrategy strategy(train, worker_config[w], state, run.out);
            run_training_loop(train, input, state, strategy, run.out);
            run.params.assign(state.params().flat().begin(), state.params().flat().end());
          } catch (...) {
            run.error = std::current_exception();
            worker_failed_.request(SIGTERM);
          }
        });
      }
    }
    rethrow_with_output(ps_);
    for (TaskRun& run : workers_) rethrow_with_output(run);
  }

  // Local training, the same data and steps on batch `batch_size`.
  std::vector<float> run_local(int batch_size) {
    const TrainConfig train = train_config(batch_size);
    std::ostringstream out;
    const TrainingInput input(train);
    TrainingState state(train);
    LocalStrategy strategy(train);
    run_training_loop(train, input, state, strategy, out);
    return {state.params().flat().begin(), state.params().flat().end()};
  }

  static void rethrow_with_output(const TaskRun& run) {
    if (!run.error) return;
    try {
      std::rethrow_exception(run.error);
    } catch (const std::exception& error) {
      FAIL() << error.what() << "\n" << run.out.str();
    }
  }

  static float max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    float most = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
      most = std::max(most, std::abs(a[i] - b[i]));
    return most;
  }

  static constexpr int64_t kSteps = 30;
  static constexpr uint16_t kUnusedPort = 9;  // discard: never connected to
  testing::TempDir dir_;
  StopRequest worker_failed_;
  TaskRun ps_;
  TaskRun workers_[2];
};

// worker -> the parameters' CRC it printed.
std::map<int, std::string> by_worker_crc(const std::string& out) {
  std::map<int, std::string> found;
  for (const testing::Match& line :
       testing::all_matches(out, R"(worker=([0-9]+): parameters crc32c = (0x[0-9A-F]{8}))")) {
    found[std::stoi(line[1])] = line[2];
  }
  return found;
}

TEST_P(PsStrategyInOneProcess, SyncWorkersEndEqualAndMatchLocalTrainingOnTheCombinedBatch) {
  constexpr int kWorkerBatch = 10;
  run_sync_cluster(kWorkerBatch);
  ASSERT_FALSE(HasFatalFailure());
  const std::string path = GetParam() == Transport::kTcp ? "tcp" : "shm";
  for (int w = 0; w < 2; ++w) {
    EXPECT_THAT(workers_[w].out.str(),
                ::testing::HasSubstr(fmt::format("worker={}: transport to ps0: {}", w, path)));
  }
  const std::vector<float> combined = run_local(2 * kWorkerBatch);
  const std::vector<float> one_slice = run_local(kWorkerBatch);

  // Both workers pulled the ps's values at the end: the same floats, to the bit.
  ASSERT_FALSE(workers_[0].params.empty());
  EXPECT_EQ(workers_[0].params, workers_[1].params);
  EXPECT_THAT(ps_.out.str(), ::testing::HasSubstr(fmt::format("done at global step {}", kSteps)));

  // The same 20 examples a step, in the same order, from the same initialisation at the same
  // learning rate: only rounding differs. The ps averages two means of 10 (the sum of the workers'
  // means, halved) where the local run takes one mean of 20, and it applies the update as a pass
  // of its own where the local run folds it into the weight gradient's GEMM: a few ulps a step,
  // compounding over 30 steps. Measured: 1.2e-7 at most, against 1e-4 (three orders of margin
  // for other kernels and summation orders); the control, batch 10 alone, ends 0.13 away, and so
  // does a ps that applies each worker's gradient alone (replicas_to_aggregate 1).
  constexpr float kTolerance = 1e-4f;
  EXPECT_LE(max_abs_difference(workers_[0].params, combined), kTolerance);
  EXPECT_GT(max_abs_difference(workers_[0].params, one_slice), 10 * kTolerance);

  // And where `dtrain train --strategy sync` ends with a ps and two worker processes on the same
  // files, to the bit (once: over in-memory links, what stands in for those processes here).
  if (GetParam() != Transport::kShm) return;
  const std::string threads = workers_[0].out.str() + workers_[1].out.str();
  const std::map<int, std::string> crcs = by_worker_crc(threads);
  ASSERT_EQ(crcs.size(), 2u) << threads;
  EXPECT_EQ(crcs.at(0), crcs.at(1)) << threads;
  const testing::ProcessResult processes = testing::run_dtrain(testing::concat(
      {"train", "--strategy", "sync", "--ps", "1", "--workers", "2"}, flags(kWorkerBatch)));
  ASSERT_EQ(processes.exit_code, 0) << testing::all_output(processes);
  EXPECT_EQ(by_worker_crc(processes.out), crcs) << processes.out;
}

INSTANTIATE_TEST_SUITE_P(Links, PsStrategyInOneProcess,
                         ::testing::Values(Transport::kTcp, Transport::kShm),
                         [](const auto& info) { return std::string(transport_name(info.param)); });

}  // namespace
}  // namespace dtrain
