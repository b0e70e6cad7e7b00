// `dtrain export` end to end: a trained checkpoint exported, accepted by ONNX's own checker
// (python3-onnx), and run by an independent runtime (ONNX Runtime for Node.js, installed by
// scripts/fetch_onnxruntime.sh) on the 10,000 MNIST test images, whose accuracy must be dtrain
// eval's and whose logits dtrain predict's. Missing tools fail the test: CI runs setup.sh first.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>

#include "data/idx.h"
#include "export/csv_table.h"
#include "support/idx_files.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "support/text_match.h"

namespace dtrain::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// Checks the model with ONNX's full checker, then prints what the test asserts on.
constexpr const char* kCheckModel = R"(
import json, sys, onnx
m = onnx.load(sys.argv[1])
onnx.checker.check_model(m, full_check=True)
shape = lambda v: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
print(json.dumps({"ir_version": m.ir_version,
                  "opsets": [[o.domain, o.version] for o in m.opset_import],
                  "inputs": [[v.name, shape(v)] for v in m.graph.input],
                  "outputs": [[v.name, shape(v)] for v in m.graph.output],
                  "metadata": {p.key: p.value for p in m.metadata_props}}))
)";

// The system's Python first: python3 on PATH may be a pyenv without Debian's onnx module.
std::optional<std::string> python_with_onnx() {
  for (const char* python : {"/usr/bin/python3", "python3"}) {
    if (run_command({python, "-c", "import onnx.checker"}).exit_code == 0) return python;
  }
  return std::nullopt;
}

std::filesystem::path npm_dir() {
  if (const char* dir = std::getenv("DTRAIN_NPM_DIR"); dir != nullptr && *dir != '\0') return dir;
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home != nullptr ? home : "/root") / ".cache/dtrain/npm";
}

struct RuntimeCheck {
  nlohmann::json model;    // what kCheckModel printed
  nlohmann::json runtime;  // what onnx_run.js printed
  double eval_accuracy = -1;
  double max_logit_difference = INFINITY;
};

// The IDX files ONNX Runtime and dtrain predict both run on.
struct RuntimeInput {
  std::filesystem::path images = mnist_dir() / "t10k-images-idx3-ubyte";
  std::filesystem::path labels = mnist_dir() / "t10k-labels-idx1-ubyte";
  size_t records = 10000;
  // ONNX Runtime gets the bytes as they are, for a graph that applies the run's --feature_scale
  // itself; else each divided by 255, as dtrain reads pixels.
  bool raw = false;
};

// Exports the newest checkpoint of train_dir and checks it against ONNX's checker, ONNX Runtime,
// dtrain eval and dtrain predict --logits.
void check_export(const TempDir& work, const std::filesystem::path& train_dir, RuntimeCheck& check,
                  const RuntimeInput& input = {}) {
  const std::optional<std::string> python = python_with_onnx();
  ASSERT_TRUE(python) << "needs /usr/bin/python3 with the onnx module: Debian package "
                         "python3-onnx (scripts/setup.sh installs it)";
  const std::filesystem::path runtime = npm_dir() / "node_modules/onnxruntime-node";
  ASSERT_TRUE(std::filesystem::exists(runtime / "package.json"))
      << "needs ONNX Runtime for Node.js in " << runtime << ": run scripts/fetch_onnxruntime.sh";

  const std::string model = (work / "model.onnx").string();
  const ProcessResult exported =
      run_dtrain({"export", "--checkpoint", train_dir.string(), "--output", model});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_THAT(exported.out, HasSubstr("wrote " + model));

  const ProcessResult checked = run_command({*python, "-c", kCheckModel, model});
  ASSERT_EQ(checked.exit_code, 0) << checked.err;
  check.model = nlohmann::json::parse(checked.out);

  const std::string runtime_logits = (work / "onnxruntime_logits.csv").string();
  std::vector<std::string> node = {"node",
                                   std::string(DTRAIN_SOURCE_DIR) + "/tests/export/onnx_run.js"};
  if (input.raw) node.push_back("--raw");
  for (const std::string& arg :
       {model, input.images.string(), input.labels.string(), runtime_logits}) {
    node.push_back(arg);
  }
  const ProcessResult ran =
      run_command(node, {"NODE_PATH=" + (npm_dir() / "node_modules").string()});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  check.runtime = nlohmann::json::parse(ran.out);

  const ProcessResult eval = run_dtrain({"eval", "--checkpoint", train_dir.string()});
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  check.eval_accuracy = number_in(eval.out, R"(test accuracy = ([0-9.]+))");

  const std::string predicted = (work / "predicted.csv").string();
  const ProcessResult predict =
      run_dtrain({"predict", "--checkpoint", train_dir.string(), "--input", input.images.string(),
                  "--logits", "--output", predicted});
  ASSERT_EQ(predict.exit_code, 0) << predict.err;

  const CsvTable ours = read_csv_table(predicted);
  const CsvTable theirs = read_csv_table(runtime_logits);
  ASSERT_EQ(ours.rows.size(), input.records);
  ASSERT_EQ(theirs.rows.size(), input.records);
  double worst = 0;
  for (size_t r = 0; r < ours.rows.size(); ++r) {
    for (int k = 0; k < 10; ++k) {
      const std::string name = "logit_" + std::to_string(k);
      worst = std::max(worst, std::abs(ours.at(r, name) - theirs.at(r, name)));
    }
  }
  check.max_logit_difference = worst;
  std::cout << "onnxruntime accuracy " << check.runtime["accuracy"].get<double>()
            << ", dtrain eval " << check.eval_accuracy << ", max |logit difference| " << worst
            << "\n";
}

TEST(OnnxExport, MnistInferenceRunsInOnnxRuntimeAsInDtrain) {
  TempDir work;
  const std::filesystem::path train_dir = work / "train";
  const ProcessResult trained =
      run_dtrain({"train", "--model", "mnist_inference", "--train_steps", "300", "--log_every", "0",
                  "--threads", "1", "--train_dir", train_dir.string()});
  ASSERT_EQ(trained.exit_code, 0) << trained.err;

  RuntimeCheck check;
  ASSERT_NO_FATAL_FAILURE(check_export(work, train_dir, check));
  EXPECT_EQ(check.model["ir_version"], 8);
  EXPECT_EQ(check.model["opsets"], nlohmann::json::parse(R"([["", 13]])"));
  EXPECT_EQ(check.model["inputs"], nlohmann::json::parse(R"([["input", ["batch", 784]]])"));
  EXPECT_EQ(check.model["outputs"], nlohmann::json::parse(R"([["logits", ["batch", 10]]])"));
  // mnist_inference's recipe evaluates the moving average, and so does the export.
  const nlohmann::json& metadata = check.model["metadata"];
  EXPECT_EQ(metadata["dtrain_model"], "mnist_inference");
  EXPECT_EQ(metadata["global_step"], "300");
  EXPECT_EQ(metadata["weights"], "moving_average");
  EXPECT_THAT(metadata["input_scaling"].get<std::string>(), HasSubstr("/ 255"));

  EXPECT_EQ(check.runtime["records"], 10000);
  EXPECT_GT(check.eval_accuracy, 0.9);
  EXPECT_NEAR(check.runtime["accuracy"].get<double>(), check.eval_accuracy, 0.001);
  EXPECT_LE(check.max_logit_difference, 1e-4);
}

// Trained on raw 0-255 pixels in a CSV with --feature_scale 1/255, the exported graph divides by
// 255 itself: ONNX Runtime given the raw bytes returns the logits dtrain predict gives for the
// same images read as pixels (x / 255, the same bits as x × 1 / 255).
TEST(OnnxExport, TheFeatureScaleIsInTheGraphSoRawFeaturesGiveDtrainsLogits) {
  TempDir work;
  const IdxArray images = read_idx(mnist_dir() / "t10k-images-idx3-ubyte");
  const IdxArray labels = read_idx(mnist_dir() / "t10k-labels-idx1-ubyte");
  std::string csv = "label";
  for (int i = 0; i < 784; ++i) csv += fmt::format(",pixel{}", i);
  csv += "\n";
  for (size_t row = 0; row < 300; ++row) {
    csv += std::to_string(labels.data[row]);
    for (size_t i = 0; i < 784; ++i) csv += fmt::format(",{}", images.data[row * 784 + i]);
    csv += "\n";
  }
  write_bytes(work / "train.csv", csv);
  RuntimeInput input{work / "few-images-idx3-ubyte", work / "few-labels-idx1-ubyte", 500, true};
  write_idx_file(input.images,
                 IdxArray{{500, 28, 28}, {images.data.begin(), images.data.begin() + 500 * 784}});
  write_idx_file(input.labels, IdxArray{{500}, {labels.data.begin(), labels.data.begin() + 500}});
  const std::filesystem::path train_dir = work / "train";
  const std::string train_csv = (work / "train.csv").string();
  const ProcessResult trained =
      run_dtrain({"train", "--model", "softmax", "--train_data", train_csv, "--test_data",
                  train_csv, "--feature_scale", "1/255", "--train_steps", "30", "--log_every", "0",
                  "--threads", "1", "--train_dir", train_dir.string()});
  ASSERT_EQ(trained.exit_code, 0) << trained.err;

  RuntimeCheck check;
  ASSERT_NO_FATAL_FAILURE(check_export(work, train_dir, check, input));
  const nlohmann::json& metadata = check.model["metadata"];
  EXPECT_EQ(metadata["dtrain.feature_scale"], "1/255");
  EXPECT_EQ(metadata["dtrain.feature_scale_in_graph"], "true");
  EXPECT_THAT(metadata["input_scaling"].get<std::string>(), HasSubstr("× 1/255"));
  EXPECT_EQ(check.runtime["records"], 500);
  EXPECT_GT(check.runtime["accuracy"].get<double>(), 0.5);
  EXPECT_LE(check.max_logit_difference, 1e-4);
}

TEST(OnnxExport, AKerasCnnRunsInOnnxRuntimeAsInDtrain) {
  TempDir work;
  const std::filesystem::path train_dir = work / "train";
  const ProcessResult trained =
      run_dtrain({"train", "--model",
                  std::string(DTRAIN_SOURCE_DIR) + "/examples/models/cnn_mnist.keras3.json",
                  "--train_steps", "60", "--log_every", "0", "--train_dir", train_dir.string()});
  ASSERT_EQ(trained.exit_code, 0) << trained.err;

  RuntimeCheck check;
  ASSERT_NO_FATAL_FAILURE(check_export(work, train_dir, check));
  // Reshape (784 -> 28x28x1), conv same, max pool, conv valid, average pool, Flatten, Dense.
  EXPECT_EQ(check.model["inputs"], nlohmann::json::parse(R"([["input", ["batch", 784]]])"));
  EXPECT_EQ(check.model["metadata"]["weights"], "raw");
  EXPECT_GT(check.eval_accuracy, 0.5);
  EXPECT_NEAR(check.runtime["accuracy"].get<double>(), check.eval_accuracy, 0.001);
  EXPECT_LE(check.max_logit_difference, 1e-4);
}

// TensorFlow's SAME padding where it is asymmetric (stride 2, an even kernel, an odd image),
// average pooling that leaves the padding out of its count, every activation, an NHWC input,
// BatchNormalization of image channels and of a Dense's outputs (without beta) on moving
// statistics that momentum 0.5 has moved far from their start. Barely trained: the logits need
// not be good, only equal.
TEST(OnnxExport, SamePaddingStridesAndAveragePoolingRunInOnnxRuntimeAsInDtrain) {
  TempDir work;
  const std::filesystem::path model = work / "same_padding.json";
  write_bytes(model, R"({"class_name": "Sequential", "config": {"name": "same_padding", "layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 28, 28, 1], "name": "in"}},
    {"class_name": "Conv2D", "config": {"name": "c1", "filters": 4, "kernel_size": [3, 3],
     "strides": [2, 2], "padding": "same", "activation": "relu"}},
    {"class_name": "BatchNormalization", "config": {"name": "bn1", "momentum": 0.5}},
    {"class_name": "Conv2D", "config": {"name": "c2", "filters": 5, "kernel_size": [2, 2],
     "padding": "same", "activation": "tanh"}},
    {"class_name": "AveragePooling2D", "config": {"name": "avg", "pool_size": [3, 3],
     "strides": [2, 2], "padding": "same"}},
    {"class_name": "MaxPooling2D", "config": {"name": "max", "pool_size": [2, 2],
     "padding": "same"}},
    {"class_name": "Activation", "config": {"name": "sig", "activation": "sigmoid"}},
    {"class_name": "Flatten", "config": {"name": "flat"}},
    {"class_name": "Dense", "config": {"name": "hidden", "units": 12}},
    {"class_name": "BatchNormalization", "config": {"name": "bn2", "momentum": 0.5,
     "center": false}},
    {"class_name": "Dense", "config": {"name": "out", "units": 10}}]}})");
  const std::filesystem::path train_dir = work / "train";
  const ProcessResult trained =
      run_dtrain({"train", "--model", model.string(), "--train_steps", "20", "--log_every", "0",
                  "--threads", "1", "--train_dir", train_dir.string()});
  ASSERT_EQ(trained.exit_code, 0) << trained.err;

  RuntimeCheck check;
  ASSERT_NO_FATAL_FAILURE(check_export(work, train_dir, check));
  EXPECT_EQ(check.model["inputs"], nlohmann::json::parse(R"([["input", ["batch", 28, 28, 1]]])"));
  EXPECT_THAT(check.runtime["input_shape"], ElementsAre(28, 28, 1));
  EXPECT_NEAR(check.runtime["accuracy"].get<double>(), check.eval_accuracy, 0.001);
  EXPECT_LE(check.max_logit_difference, 1e-4);
}

// Reads a safetensors checkpoint with json and struct alone (not dtrain's reader) and the ONNX
// model's initializers, and prints, for each BatchNormalization statistic of the checkpoint, the
// largest difference from the initializer of that name and how far it lies from its start.
constexpr const char* kCompareStatistics = R"(
import json, struct, sys, onnx
from onnx import numpy_helper
data = open(sys.argv[1], 'rb').read()
length = struct.unpack('<Q', data[:8])[0]
header = json.loads(data[8:8 + length])
graph = {i.name: numpy_helper.to_array(i).ravel().tolist() for i in onnx.load(sys.argv[2]).graph.initializer}
report = {}
for name, entry in header.items():
    if not (name.endswith('/moving_mean') or name.endswith('/moving_variance')): continue
    begin, end = entry['data_offsets']
    saved = struct.unpack('<%df' % ((end - begin) // 4), data[8 + length + begin:8 + length + end])
    start = 1.0 if name.endswith('variance') else 0.0
    exported = graph.get(name, [])
    report[name] = {'count': len(saved), 'exported': len(exported),
                    'difference': max((abs(a - b) for a, b in zip(saved, exported)), default=-1),
                    'moved': max(abs(a - start) for a in saved)}
print(json.dumps(report))
)";

// The TensorFlow.js-written CNN (examples/models/cnn_bn_mnist.tfjs.json: BatchNormalization with
// momentum 0.99 and 0.9) trained by two all-reduce workers: the chief's closing accuracy, dtrain
// eval's of the checkpoint and ONNX Runtime's of the export agree, and the statistics the ONNX
// graph normalises by are, bit for bit, the checkpoint's moving statistics, read independently.
TEST(OnnxExport, ATfjsBatchNormCnnTrainedByAllreduceEvaluatesAlikeOnTheStatisticsItTrained) {
  TempDir work;
  const std::filesystem::path train_dir = work / "train";
  const ProcessResult trained = run_dtrain(
      {"train", "--model",
       std::string(DTRAIN_SOURCE_DIR) + "/examples/models/cnn_bn_mnist.tfjs.json", "--strategy",
       "allreduce", "--workers", "2", "--batch_size", "25", "--train_steps", "60", "--threads", "1",
       "--log_every", "0", "--train_dir", train_dir.string()});
  ASSERT_EQ(trained.exit_code, 0) << trained.out << trained.err;
  const double chief_accuracy = number_in(trained.out, R"(worker=0: test accuracy = ([0-9.]+))");

  RuntimeCheck check;
  ASSERT_NO_FATAL_FAILURE(check_export(work, train_dir, check));
  EXPECT_EQ(check.runtime["records"], 10000);
  EXPECT_DOUBLE_EQ(check.eval_accuracy, chief_accuracy);
  EXPECT_NEAR(check.runtime["accuracy"].get<double>(), check.eval_accuracy, 0.001);
  EXPECT_LE(check.max_logit_difference, 1e-4);

  const std::optional<std::string> python = python_with_onnx();
  ASSERT_TRUE(python);
  const std::filesystem::path checkpoint = train_dir / "model.ckpt-60.safetensors";
  ASSERT_TRUE(std::filesystem::exists(checkpoint));
  const ProcessResult compared = run_command(
      {*python, "-c", kCompareStatistics, checkpoint.string(), (work / "model.onnx").string()});
  ASSERT_EQ(compared.exit_code, 0) << compared.err;
  const nlohmann::json report = nlohmann::json::parse(compared.out);
  ASSERT_EQ(report.size(), 4u) << report.dump();
  for (const auto& [name, statistic] : report.items()) {
    EXPECT_EQ(statistic["exported"], statistic["count"]) << name;
    EXPECT_EQ(statistic["difference"].get<double>(), 0.0) << name;
    // Moved from the start by training, so equality says they are what training produced.
    EXPECT_GT(statistic["moved"].get<double>(), 0.01) << name;
  }
}

TEST(OnnxExport, AnUnreadableCheckpointOrUnwritableOutputIsNamed) {
  TempDir work;
  const std::string missing = (work / "no_such.safetensors").string();
  const ProcessResult unreadable =
      run_dtrain({"export", "--checkpoint", missing, "--output", (work / "m.onnx").string()});
  EXPECT_EQ(unreadable.exit_code, 1);
  EXPECT_THAT(unreadable.err, HasSubstr(missing));
  EXPECT_FALSE(std::filesystem::exists(work / "m.onnx"));

  const std::filesystem::path train_dir = work / "train";
  const ProcessResult trained = run_dtrain({"train", "--model", "softmax", "--train_steps", "5",
                                            "--log_every", "0", "--train_dir", train_dir.string()});
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  const std::string unwritable = (work / "no_such_dir" / "m.onnx").string();
  const ProcessResult failed =
      run_dtrain({"export", "--checkpoint", train_dir.string(), "--output", unwritable});
  EXPECT_EQ(failed.exit_code, 1);
  EXPECT_THAT(failed.err, HasSubstr(unwritable));

  const ProcessResult missing_flag = run_dtrain({"export", "--checkpoint", train_dir.string()});
  EXPECT_EQ(missing_flag.exit_code, 2);
  EXPECT_THAT(missing_flag.err, HasSubstr("--output"));
}

// The output goes through a rename, so an --output naming the checkpoint being read (by any
// spelling: through a link to its folder, or ../) or the index beside it would destroy the run.
TEST(OnnxExport, AnOutputOverTheCheckpointBeingReadIsRefusedAndTheCheckpointStillLoads) {
  TempDir work;
  const std::filesystem::path train_dir = work / "train";
  const ProcessResult trained = run_dtrain({"train", "--model", "softmax", "--train_steps", "20",
                                            "--log_every", "0", "--train_dir", train_dir.string()});
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  const std::filesystem::path checkpoint = train_dir / "model.ckpt-20.safetensors";
  const std::string before = read_bytes(checkpoint);
  const std::string index_before = read_bytes(train_dir / "checkpoint");
  std::filesystem::create_directory_symlink(train_dir, work / "alias");

  const std::vector<std::string> outputs = {
      checkpoint.string(), (work / "alias" / "model.ckpt-20.safetensors").string(),
      (train_dir / ".." / "train" / "model.ckpt-20.safetensors").string(),
      (train_dir / "checkpoint").string()};
  for (const std::string& output : outputs) {
    for (const std::string& given : {train_dir.string(), checkpoint.string()}) {
      const ProcessResult r = run_dtrain({"export", "--checkpoint", given, "--output", output});
      EXPECT_EQ(r.exit_code, 2) << output << "\n" << r.out << r.err;
      EXPECT_THAT(r.err, HasSubstr("--output " + output + ": "));
      EXPECT_THAT(r.err, HasSubstr(checkpoint.string()));
    }
  }
  EXPECT_EQ(read_bytes(checkpoint), before);
  EXPECT_EQ(read_bytes(train_dir / "checkpoint"), index_before);
  const ProcessResult eval = run_dtrain({"eval", "--checkpoint", train_dir.string()});
  EXPECT_EQ(eval.exit_code, 0) << eval.err;

  // Beside the checkpoints, under a name of its own, is a place like any other.
  const ProcessResult beside = run_dtrain({"export", "--checkpoint", train_dir.string(), "--output",
                                           (train_dir / "model.onnx").string()});
  EXPECT_EQ(beside.exit_code, 0) << beside.err;
}

TEST(OnnxExport, RawWeightsAreExportedWhenAskedFor) {
  TempDir work;
  const std::filesystem::path train_dir = work / "train";
  const ProcessResult trained = run_dtrain({"train", "--model", "softmax", "--train_steps", "20",
                                            "--log_every", "0", "--train_dir", train_dir.string()});
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  const ProcessResult averaged = run_dtrain(
      {"export", "--checkpoint", train_dir.string(), "--output", (work / "average.onnx").string()});
  ASSERT_EQ(averaged.exit_code, 0) << averaged.err;
  EXPECT_THAT(averaged.out, HasSubstr("(moving average)"));
  const ProcessResult raw =
      run_dtrain({"export", "--raw_weights", "--checkpoint", train_dir.string(), "--output",
                  (work / "raw.onnx").string()});
  ASSERT_EQ(raw.exit_code, 0) << raw.err;
  EXPECT_THAT(raw.out, Not(HasSubstr("moving average")));
  // The same graph around different weights, and metadata that says which.
  const std::string average_bytes = read_bytes(work / "average.onnx");
  const std::string raw_bytes = read_bytes(work / "raw.onnx");
  EXPECT_THAT(average_bytes, HasSubstr("moving_average"));
  EXPECT_THAT(raw_bytes, Not(HasSubstr("moving_average")));
  EXPECT_NE(average_bytes, raw_bytes);
}

}  // namespace
}  // namespace dtrain::testing
