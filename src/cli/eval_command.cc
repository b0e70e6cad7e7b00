// `dtrain eval --checkpoint PATH`: test accuracy of a checkpoint.
#include <iostream>

#include "cli/commands.h"
#include "train/evaluate.h"

namespace dtrain::cli {

void add_eval_command(CLI::App& app, Action& action) {
  auto config = std::make_shared<EvalConfig>();
  auto data_dir = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("eval", "Print the test accuracy of a checkpoint");
  cmd->add_option("--checkpoint", config->checkpoint,
                  "A checkpoint file, or a --train_dir (its newest)")
      ->required();
  cmd->add_option("--data_dir", *data_dir,
                  "MNIST folder (default $DTRAIN_DATA_DIR or ~/.cache/dtrain/mnist)");
  cmd->add_flag("--moving_average", config->moving_average, "Evaluate the moving-average weights");
  cmd->callback([config, data_dir, &action] {
    action = [config, data_dir] {
      config->data_dir = data_dir->empty() ? default_data_dir() : *data_dir;
      evaluate_checkpoint(*config, std::cout);
      return 0;
    };
  });
}

}  // namespace dtrain::cli
