// TensorBoard event files from real runs, read by tests/metrics/tensorboard/tb_events.py: an
// independent reader (Python's protobuf runtime over .proto files typed in from TensorFlow's
// schema, crcmod's CRC-32C) that checks both CRCs of every record. Local and async ps runs leave
// the scalars, histograms and texts docs/training.md promises, with the step lines' numbers; a
// resumed run opens a new file that starts with SessionLog.START; a corrupted or cut file is
// caught.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "support/checkpoints.h"
#include "support/process.h"
#include "support/tb_events.h"
#include "support/temp_dir.h"
#include "support/text_match.h"

namespace dtrain::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// The steps a scalar was logged at rise, one point per step.
void expect_rising_steps(const std::vector<std::pair<int64_t, double>>& points) {
  for (size_t i = 1; i < points.size(); ++i) EXPECT_GT(points[i].first, points[i - 1].first);
}

// The histogram of a tensor the checkpoint holds describes exactly its values.
void expect_histogram_of(const json& histogram, const CheckpointTensor& tensor) {
  const json& h = histogram["histo"];
  double sum = 0, lo = INFINITY, hi = -INFINITY;
  for (float v : tensor.values) {
    sum += v;
    lo = std::min<double>(lo, v);
    hi = std::max<double>(hi, v);
  }
  EXPECT_EQ(h["num"].get<double>(), static_cast<double>(tensor.values.size()));
  EXPECT_NEAR(h["sum"].get<double>(), sum, 1e-6 * (1 + std::fabs(sum)) + 1e-4);
  EXPECT_EQ(h["min"].get<double>(), lo);
  EXPECT_EQ(h["max"].get<double>(), hi);
  double counted = 0;
  for (const json& c : h["bucket"]) counted += c.get<double>();
  EXPECT_EQ(counted, static_cast<double>(tensor.values.size()));
  EXPECT_EQ(h["bucket"].size(), h["bucket_limit"].size());
}

// mnist_inference's variables.
const std::vector<std::string> kVariables = {"layer1/weights", "layer1/biases", "layer2/weights",
                                             "layer2/biases"};

TEST(TensorBoardEvents, LocalRunWritesScalarsHistogramsAndConfigThatAnIndependentReaderDecodes) {
  TempDir dir;
  const ProcessResult r =
      run_dtrain({"train", "--model", "mnist_inference", "--threads", "1", "--train_steps", "300",
                  "--log_every", "50", "--eval_every", "100", "--summary_steps", "100",
                  "--train_dir", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;

  std::vector<std::string> check = {"check", dir.path().string()};
  for (const char* tag : {"loss", "validation/accuracy", "validation/loss", "test_accuracy",
                          "learning_rate", "examples_per_sec", "steps_per_sec"}) {
    check.insert(check.end(), {"--expect-scalar", tag});
  }
  for (const std::string& v : kVariables)
    check.insert(check.end(),
                 {"--expect-histogram", v, "--expect-histogram", "gradients_on_average/" + v});
  check.insert(check.end(), {"--expect-text", "config"});
  const ProcessResult checked = run_event_reader(check);
  ASSERT_EQ(checked.exit_code, 0) << checked.err;

  const json files = json::parse(checked.out)["files"];
  ASSERT_EQ(files.size(), 1u) << "one event file, in the train_dir itself";
  const json& file = files[0];
  expect_clean_events(file);

  // The loss at every step line, equal to the line's.
  const auto losses = scalars_of(file, "loss");
  std::map<int64_t, double> printed;
  for (const Match& m : all_matches(r.out, R"(^step ([0-9]+), loss = ([0-9.]+))"))
    printed[std::stoll(m[1])] = std::stod(m[2]);
  ASSERT_EQ(printed.size(), 6u) << r.out;
  expect_rising_steps(losses);
  for (const auto& [step, loss] : printed) {
    const auto at =
        std::find_if(losses.begin(), losses.end(), [&](const auto& p) { return p.first == step; });
    ASSERT_NE(at, losses.end()) << "no loss at step " << step;
    EXPECT_NEAR(at->second, loss, 5e-5) << "step " << step;
  }

  // Validation accuracy at every evaluation and test accuracy once, at the end, as printed.
  const auto validation = scalars_of(file, "validation/accuracy");
  ASSERT_EQ(validation.size(), 3u);
  EXPECT_EQ(validation.front().first, 100);
  const auto accuracies = scalars_of(file, "test_accuracy");
  ASSERT_EQ(accuracies.size(), 1u);
  const auto final_line = first_match(r.out, R"(^test accuracy = ([0-9.]+))");
  ASSERT_TRUE(final_line.has_value()) << r.out;
  EXPECT_EQ(accuracies.back().first, 300);
  EXPECT_NEAR(accuracies.back().second, std::stod((*final_line)[1]), 5e-5);

  // Histograms at steps 100, 200, 300; the last one's of the variables as checkpointed.
  const Checkpoint checkpoint = newest_checkpoint(dir.path());
  ASSERT_EQ(checkpoint.global_step, 300);
  for (const std::string& v : kVariables) {
    const auto h = last_histogram(file, v);
    ASSERT_TRUE(h.has_value()) << v;
    EXPECT_EQ(h->step, 300);
    const CheckpointTensor* tensor = checkpoint.find(v);
    ASSERT_NE(tensor, nullptr) << v;
    expect_histogram_of(h->value, *tensor);
    const auto g = last_histogram(file, "gradients_on_average/" + v);
    ASSERT_TRUE(g.has_value());
    EXPECT_EQ(g->value["histo"]["num"].get<double>(), static_cast<double>(tensor->values.size()));
    EXPECT_GT(g->value["histo"]["sum_squares"].get<double>(), 0) << "a gradient, not zeros";
  }
  int histogram_steps = 0;
  for (const EventValue& v : values_of(file))
    if (v.value["tag"] == "layer1/weights") ++histogram_steps;
  EXPECT_EQ(histogram_steps, 3);

  // The configuration as text, naming the model.
  bool config_seen = false;
  for (const EventValue& v : values_of(file)) {
    if (v.value["tag"] != "config") continue;
    config_seen = true;
    EXPECT_EQ(v.value["kind"], "text");
    EXPECT_THAT(v.value["text"].get<std::string>(), HasSubstr("mnist_inference"));
  }
  EXPECT_TRUE(config_seen);
}

TEST(TensorBoardEvents, AsyncPsRunWritesTheChiefsEventsAndOneRunPerWorker) {
  TempDir dir;
  const ProcessResult r =
      run_dtrain({"train", "--model", "mnist_inference", "--strategy", "async", "--ps", "1",
                  "--workers", "2", "--threads", "1", "--train_steps", "400", "--log_every", "50",
                  "--summary_steps", "100", "--train_dir", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;

  const json chief = dump_events(dir.path());
  // The chief's file, then worker_0/ and worker_1/.
  ASSERT_EQ(event_files(dir.path()).size(), 1u);
  const json& main = chief["files"][0];
  expect_clean_events(main);
  for (const char* tag :
       {"loss", "test_accuracy", "learning_rate", "examples_per_sec", "steps_per_sec",
        "ps/stale_gradients", "ps/duplicate_pushes", "ps/non_finite_gradients"}) {
    EXPECT_FALSE(scalars_of(main, tag).empty()) << tag;
  }
  expect_rising_steps(scalars_of(main, "loss"));
  for (const std::string& v : kVariables) {
    EXPECT_TRUE(last_histogram(main, v).has_value()) << v;
    EXPECT_TRUE(last_histogram(main, "gradients_on_average/" + v).has_value()) << v;
  }

  for (int worker = 0; worker < 2; ++worker) {
    const std::filesystem::path worker_dir = dir.path() / ("worker_" + std::to_string(worker));
    ASSERT_EQ(event_files(worker_dir).size(), 1u) << worker_dir;
    const json file = dump_events(worker_dir)["files"][0];
    expect_clean_events(file);
    // The worker's own loss and throughput, one point per step line it printed, equal to them.
    std::vector<std::pair<int64_t, double>> printed;
    for (const Match& m : all_matches(
             r.out,
             "worker=" + std::to_string(worker) +
                 R"(, epoch=[0-9]+, global_step=([0-9]+), local_step=[0-9]+, loss=([0-9.]+))"))
      printed.emplace_back(std::stoll(m[1]), std::stod(m[2]));
    const auto losses = scalars_of(file, "loss");
    ASSERT_FALSE(printed.empty()) << r.out;
    ASSERT_EQ(losses.size(), printed.size()) << "worker " << worker;
    for (size_t i = 0; i < printed.size(); ++i) {
      EXPECT_EQ(losses[i].first, printed[i].first);
      EXPECT_NEAR(losses[i].second, printed[i].second, 5e-5);
    }
    EXPECT_EQ(scalars_of(file, "examples_per_sec").size(), printed.size());
    EXPECT_TRUE(last_histogram(file, "layer1/weights") == std::nullopt)
        << "histograms are the chief's, in the run's own folder";
  }
}

TEST(TensorBoardEvents, AResumedRunOpensANewFileThatStartsAtItsStepWithSessionLogStart) {
  TempDir dir;
  const std::vector<std::string> train = {
      "train",       "--model", "softmax",     "--threads",         "1",
      "--log_every", "50",      "--train_dir", dir.path().string(), "--train_steps"};
  auto with_steps = [&](const char* steps) {
    std::vector<std::string> args = train;
    args.push_back(steps);
    return args;
  };
  ASSERT_EQ(run_dtrain(with_steps("200")).exit_code, 0);
  const ProcessResult resumed = run_dtrain(with_steps("300"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;

  const auto files = event_files(dir.path());
  ASSERT_EQ(files.size(), 2u);
  const json first = dump_events(files[0])["files"][0];
  const json second = dump_events(files[1])["files"][0];
  expect_clean_events(first);
  expect_clean_events(second);
  EXPECT_EQ(scalars_of(first, "loss").back().first, 200);
  ASSERT_GE(second["events"].size(), 2u);
  const json& start = second["events"][1];
  ASSERT_TRUE(start.contains("session_log")) << start;
  EXPECT_EQ(start["session_log"], "START");
  EXPECT_EQ(start["step"], 200);
  const auto losses = scalars_of(second, "loss");
  ASSERT_FALSE(losses.empty());
  EXPECT_EQ(losses.front().first, 250);
  EXPECT_EQ(losses.back().first, 300);
}

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(TensorBoardEvents, ACorruptedRecordIsCaughtAndACutLastRecordLeavesTheEarlierOnesReadable) {
  TempDir dir;
  const ProcessResult r =
      run_dtrain({"train", "--model", "softmax", "--threads", "1", "--train_steps", "200",
                  "--log_every", "20", "--summary_steps", "50", "--logdir", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto files = event_files(dir.path());
  ASSERT_EQ(files.size(), 1u) << "--logdir alone writes events (and no checkpoint)";
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "metrics.jsonl"));
  const std::string original = read_bytes(files[0]);
  const json whole = dump_events(files[0])["files"][0];
  expect_clean_events(whole);
  const size_t records = whole["records"].get<size_t>();
  ASSERT_GE(records, 10u);

  // One flipped bit in the middle of the file: the reader names a bad record and check fails.
  std::string flipped = original;
  flipped[flipped.size() / 2] ^= 0x10;
  write_bytes(files[0], flipped);
  const json corrupted = dump_events(files[0])["files"][0];
  EXPECT_GE(corrupted["bad_records"].size(), 1u);
  EXPECT_NE(run_event_reader({"check", files[0].string()}).exit_code, 0);

  // A run killed while writing its last record: every earlier record is still there.
  write_bytes(files[0], original.substr(0, original.size() - 7));
  const json cut = dump_events(files[0])["files"][0];
  EXPECT_EQ(cut["bad_records"].size(), 0u);
  EXPECT_FALSE(cut["truncated_tail"].is_null());
  EXPECT_EQ(cut["records"].get<size_t>(), records - 1);
  EXPECT_EQ(run_event_reader({"check", files[0].string()}).exit_code, 0);
}

TEST(TensorBoardEvents, ALogdirThatCannotBeCreatedIsRefusedNamingIt) {
  TempDir dir;
  std::ofstream(dir / "a_file") << "not a folder";
  const std::string logdir = (dir / "a_file" / "logs").string();
  const ProcessResult r = run_dtrain(
      {"train", "--model", "softmax", "--threads", "1", "--train_steps", "10", "--logdir", logdir});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr(logdir));
}

}  // namespace
}  // namespace dtrain::testing
