// The single-process training loop (strategies `local` and `towers`): batches → gradients →
// optimizer update, with step lines, periodic evaluation, metrics.jsonl, checkpoints and resume
// from --train_dir.
#pragma once

#include <ostream>

#include "train/train_config.h"

namespace dtrain {

// Trains as config says, printing step lines and the final lines to out. Resumes from the newest
// valid checkpoint in config.train_dir when there is one.
TrainResult train_local(const TrainConfig& config, std::ostream& out);

}  // namespace dtrain
