// The local entry: load, build the state, run the loop.
#include "train/trainer.h"

#include "train/local_strategy.h"
#include "train/training_input.h"
#include "train/training_loop.h"
#include "train/training_state.h"

namespace dtrain {

TrainResult train_local(const TrainConfig& config, std::ostream& out) {
  const TrainingInput input(config);
  TrainingState state(config);
  LocalStrategy strategy(config);
  return run_training_loop(config, input, state, strategy, out);
}

}  // namespace dtrain
