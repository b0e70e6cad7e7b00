// Test accuracy of a saved checkpoint (`dtrain eval`): the model is rebuilt from the checkpoint's
// own metadata, so no training flags are needed.
#pragma once

#include <filesystem>
#include <ostream>

namespace dtrain {

struct EvalConfig {
  std::filesystem::path checkpoint;  // a checkpoint file, or a train_dir (its newest valid one)
  std::filesystem::path data_dir;
  bool moving_average = false;  // evaluate the averaged weights the checkpoint holds
};

double evaluate_checkpoint(const EvalConfig& config, std::ostream& out);

}  // namespace dtrain
