// Test accuracy of a saved checkpoint (`dtrain eval`): the model is rebuilt from the checkpoint's
// own metadata, so no training flags are needed.
#pragma once

#include <filesystem>
#include <ostream>

namespace dtrain {

struct EvalConfig {
  std::filesystem::path checkpoint;  // a checkpoint file, or a train_dir (its newest valid one)
  std::filesystem::path data_dir;
  // Which weights to evaluate. By default, those the training run evaluated: the moving average
  // when it was trained with evaluation on one, the raw weights otherwise.
  enum class Weights { kAsTrained, kRaw, kMovingAverage };
  Weights weights = Weights::kAsTrained;
};

double evaluate_checkpoint(const EvalConfig& config, std::ostream& out);

}  // namespace dtrain
