// Test accuracy of a saved checkpoint (`dtrain eval`): the model, the weights to evaluate and the
// test data are taken from the checkpoint's own metadata, so no training flags are needed. The
// loading itself (load_checkpoint_model) is shared with `dtrain export` and `dtrain predict`.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "ckpt/checkpoint.h"
#include "data/data_options.h"
#include "nn/model.h"
#include "nn/model_spec.h"
#include "nn/param_set.h"

namespace dtrain {

// Which weights of a checkpoint to use. By default, those the training run evaluated: the moving
// average when it was trained with evaluation on one, the raw weights otherwise.
enum class CheckpointWeights { kAsTrained, kRaw, kMovingAverage };

// A checkpoint's model with the weights the run evaluated (or those asked for), ready to run.
struct CheckpointModel {
  Checkpoint checkpoint;       // its metadata and config; tensors as read
  std::filesystem::path path;  // the file, also when a folder was given
  ModelSpec spec;
  std::unique_ptr<Model> model;
  ParamSet params;
  bool moving_average = false;  // params hold the moving averages
};

// Loads path (a checkpoint file, or a train_dir: its newest valid checkpoint; a line on `log` for
// each one skipped) and builds its model: its own Keras JSON spec when it has one, else
// (checkpoints written before specs were stored) the built-in model it names. Throws
// CheckpointError naming the file for an unreadable checkpoint, a folder with none, or moving
// averages asked for but absent.
CheckpointModel load_checkpoint_model(const std::filesystem::path& path, CheckpointWeights weights,
                                      std::ostream& log);
// The same for a checkpoint already in memory; `path` names it in errors (and in ONNX metadata).
CheckpointModel checkpoint_model(Checkpoint checkpoint, const std::filesystem::path& path,
                                 CheckpointWeights weights);

// How the run read its data files ("data"/"options" of the config; the defaults when absent).
DataOptions checkpoint_data_options(const Checkpoint& ckpt);

struct EvalConfig {
  std::filesystem::path checkpoint;  // a checkpoint file, or a train_dir (its newest valid one)
  // The test data: these files (comma-separated files or globs) if given; else the files the run
  // was tested on; else MNIST from data_dir if given, else from the run's data_dir where this
  // machine has it, else from default_data_dir.
  std::string test_data;
  std::filesystem::path data_dir;
  std::filesystem::path default_data_dir;
  using Weights = CheckpointWeights;
  Weights weights = Weights::kAsTrained;
  // How to read the test files, given how the run read its data (checkpoint_data_options): the
  // CLI puts the data flags given on eval's command line over it. Empty: as the run did.
  std::function<DataOptions(const DataOptions& run_options)> data_options;
  // The evaluation's products and convolutions (bf16: on bf16 inputs, as --precision bf16 trains).
  Precision precision = Precision::kFp32;
};

double evaluate_checkpoint(const EvalConfig& config, std::ostream& out);

}  // namespace dtrain
