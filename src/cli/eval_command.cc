// `dtrain eval --checkpoint PATH`: test accuracy of a checkpoint.
#include <iostream>

#include "cli/commands.h"
#include "train/evaluate.h"

namespace dtrain::cli {

void add_weights_flags(CLI::App* cmd, const std::shared_ptr<CheckpointWeights>& weights,
                       const std::string& verb) {
  CLI::Option* average_flag = cmd->add_flag_callback(
      "--moving_average", [weights] { *weights = CheckpointWeights::kMovingAverage; },
      verb + " the moving-average weights (default: whichever the training run evaluated)");
  cmd->add_flag_callback(
         "--raw_weights", [weights] { *weights = CheckpointWeights::kRaw; },
         verb + " the raw weights, not their moving average")
      ->excludes(average_flag);
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
  auto weights = std::make_shared<CheckpointWeights>(CheckpointWeights::kAsTrained);
  add_weights_flags(cmd, weights, "Evaluate");
  cmd->callback([config, data_dir, weights, &action] {
    config->weights = *weights;
    action = [config, data_dir] {
      config->data_dir = *data_dir;
      config->default_data_dir = default_data_dir();
      evaluate_checkpoint(*config, std::cout);
      return 0;
    };
  });
}

}  // namespace dtrain::cli
