// `dtrain eval --checkpoint PATH`: test accuracy of a checkpoint; and what the commands that read a
// checkpoint share.
#include <fmt/format.h>

#include <iostream>

#include "base/error.h"
#include "ckpt/checkpoint_format.h"
#include "ckpt/checkpoint_manager.h"
#include "cli/commands.h"
#include "plan/flag_checks.h"
#include "train/evaluate.h"

namespace dtrain::cli {

void add_weights_flags(CLI::App* cmd, const std::shared_ptr<CheckpointWeights>& weights,
                       const std::string& verb) {
  CLI::Option* average_flag = cmd->add_flag_callback(
      "--moving_average", [weights] { *weights = CheckpointWeights::kMovingAverage; },
      verb + " the moving-average weights (default: whichever the training run evaluated)");
  cmd->add_flag_callback(
         "--raw_weights", [weights] { *weights = CheckpointWeights::kRaw; },
         verb + " the raw weights, not their moving average (not with --moving_average)")
      ->excludes(average_flag);
}

namespace {

// As the kernel would resolve it, so that "./x", "../run/x" and a link to the folder all name the
// same file; lexically, where a part of it cannot be looked at.
std::filesystem::path resolved(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::path full =
      std::filesystem::weakly_canonical(std::filesystem::absolute(path), ec);
  return ec ? std::filesystem::absolute(path).lexically_normal() : full;
}

}  // namespace

void refuse_output_over_checkpoint(std::string_view flag, const std::filesystem::path& output,
                                   const std::filesystem::path& checkpoint) {
  const std::filesystem::path out = resolved(output);
  const std::filesystem::path read = resolved(checkpoint);
  std::error_code ec;  // equivalent() fails, meaning no, when output does not exist yet
  // equivalent() adds a hard link to the checkpoint.
  const bool same_file = out == read || std::filesystem::equivalent(output, checkpoint, ec);
  const std::string name = out.filename().string();
  const bool managed =
      out.parent_path() == read.parent_path() &&
      (name == ckpt_format::kIndexFileName || CheckpointManager::step_of(name).has_value());
  if (same_file) {
    throw UsageError(fmt::format("{} {}: is the checkpoint being read, {}; write elsewhere", flag,
                                 output.string(), checkpoint.string()));
  }
  if (managed) {
    throw UsageError(fmt::format(
        "{} {}: would replace a file of the checkpoint folder that {} is read from; write "
        "elsewhere",
        flag, output.string(), checkpoint.string()));
  }
}

void add_eval_command(CLI::App& app, Action& action) {
  auto config = std::make_shared<EvalConfig>();
  auto data_dir = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("eval", "Print the test accuracy of a checkpoint");
  cmd->add_option("--checkpoint", config->checkpoint,
                  "A checkpoint file, or a --train_dir (its newest)")
      ->required();
  cmd->add_option("--test_data", config->test_data,
                  "Test files, comma-separated files or globs (default: those the run was tested "
                  "on)");
  cmd->add_option("--data_dir", *data_dir,
                  "MNIST folder (default: the run's, else $DTRAIN_DATA_DIR or "
                  "~/.cache/dtrain/mnist)");
  auto data_flags = std::make_shared<DataOptions>();
  add_data_option_flags(cmd, data_flags.get(), "as the checkpoint's run read its data");
  auto weights = std::make_shared<CheckpointWeights>(CheckpointWeights::kAsTrained);
  add_weights_flags(cmd, weights, "Evaluate");
  auto precision = std::make_shared<std::string>("fp32");
  cmd->add_option("--precision", *precision,
                  "fp32 | bf16: the evaluation's products and convolutions on bf16 inputs")
      ->capture_default_str();
  cmd->callback([cmd, config, data_dir, data_flags, weights, precision, &action] {
    config->weights = *weights;
    config->data_options = [cmd, data_flags](const DataOptions& run_options) {
      return given_data_options(*cmd, *data_flags, run_options);
    };
    action = [config, data_dir, precision] {
      config->precision = usable_precision(*precision);
      config->data_dir = *data_dir;
      config->default_data_dir = default_data_dir();
      evaluate_checkpoint(*config, std::cout);
      return 0;
    };
  });
}

}  // namespace dtrain::cli
