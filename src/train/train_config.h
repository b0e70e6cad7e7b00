// Everything one training run needs, as a plain struct: the CLI fills it from flags, tests fill it
// directly. Nothing below cli/ reads flags or the environment.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/stop_request.h"
#include "ckpt/checkpoint.h"
#include "data/data_options.h"
#include "metrics/run_log.h"
#include "nn/model_zoo.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "tensor/blas.h"
#include "train/run_control.h"

namespace dtrain {

struct TrainConfig;

// What the resume check (train/resume_check.h) makes of a recorded setting that changed.
enum class ResumeRule {
  kCompared,      // refused unless the run is told --resume
  kNotCompared,   // changes nothing training computes: where the test data are, text for people
  kNotResumable,  // a checkpoint of another value cannot be restored at all (another model)
};

// One recorded setting: its path in the recorded JSON (levels joined by '.'), the flag that sets
// it, as the resume check names it, and its rule. A level without a flag of its own (the data
// options) has its leaves named as their flags are: "--" and the leaf's key.
struct RecordedKey {
  std::string_view key{};   // "lr_schedule.decay_steps"
  std::string_view flag{};  // "--lr_decay_steps"
  ResumeRule rule = ResumeRule::kCompared;
};

// The settings of a run as its checkpoints record them (train_config_json), and how each is
// compared when a run finds a checkpoint.
struct SettingsRecord {
  nlohmann::json (*settings)(const TrainConfig& config) = nullptr;
  std::span<const RecordedKey> keys{};
};

struct TrainConfig {
  ModelConfig model;
  OptimizerConfig optimizer;
  // Where the optimizer came from when a model file compiled one (plan/recipes.h): the run
  // table's line under the optimizer's; empty otherwise.
  std::string optimizer_note;
  int batch_size = 100;
  // The examples one global step trains on: batch_size times the workers whose batches a step
  // averages (all-reduce: every worker; sync: replicas_to_aggregate; local, towers and async: one
  // batch). The run plan sets it; checkpoints record it, so that resuming with another worker
  // count, and so other steps per epoch, is refused or said (train/resume_check.h). 0: unknown.
  int global_batch = 0;
  float learning_rate = 0.8f;
  // The schedule's formulas are in optim/lr_schedule.h.
  LrDecay lr_schedule = LrDecay::kExponential;
  float lr_decay_rate = 0.99f;  // exponential decay; 1 disables it
  // Exponential: the period of lr_decay_rate (0: one epoch of global steps). Cosine: the steps to
  // reach lr_alpha (0: the run's total steps).
  int64_t lr_decay_steps = 0;
  bool lr_staircase = true;
  float lr_alpha = 0;                  // cosine: the final rate as a fraction of learning_rate
  std::vector<int64_t> lr_boundaries;  // piecewise: global steps, strictly increasing
  std::vector<float> lr_values;        // piecewise: one more rate than boundaries
  int64_t lr_warmup_steps = 0;         // linear warmup from 0 over these global steps
  int64_t train_steps = 0;             // global step to stop at; 0: use epochs
  double epochs = 10;
  float moving_average_decay = 0;    // 0 disables the moving average
  bool eval_moving_average = false;  // final and periodic evaluation on the averaged weights

  std::filesystem::path data_dir;  // MNIST's IDX files, unless train_data is given
  // The user's files (comma-separated files or globs), both or neither; their format and
  // features as data_options says (data/data_options.h).
  std::string train_data, test_data;
  DataOptions data_options;
  // 0: the training data in memory, reshuffled whole every epoch. N > 0: the training files
  // streamed through a shuffle buffer of N examples (tf.data's shuffle), for data larger than
  // memory.
  int64_t shuffle_buffer = 0;
  std::filesystem::path train_dir;  // empty: no checkpoints, no metrics.jsonl
  // TensorBoard event files (--logdir); empty: in train_dir, if there is one.
  std::filesystem::path logdir;
  // Histograms of the variables and their gradients every this many global steps (0: none).
  int64_t summary_steps = 100;
  int64_t validation_size = 5000;
  uint64_t seed = 1;
  // False: each epoch takes the training examples in their order (Python's fit(shuffle=False);
  // data in memory only).
  bool shuffle = true;

  int threads = 1;  // BLAS threads per process, shared by the towers
  // The training steps' matrix products and convolutions: fp32, or bf16 inputs with fp32 sums
  // (tensor/blas.h). Evaluation is fp32 either way.
  Precision precision = Precision::kFp32;
  int towers = 1;

  // Step lines every log_every steps (at least once an epoch) or every log_secs seconds,
  // whichever is first; log_every 0: none, log_secs 0: by steps alone.
  int64_t log_every = 100;
  double log_secs = 10;
  int64_t save_steps = 0;  // 0: only at the end
  double save_secs = 0;    // 0: off
  int keep_checkpoints = 5;
  // Evaluations of the validation set (validation_size examples held out of the training data)
  // every this many global steps; 0: none. The test set is evaluated once, at the end.
  int64_t eval_every = 0;
  // Without eval_every, an evaluation at the end of every epoch, as Keras's fit does with
  // validation data (Python's fit sets it).
  bool eval_each_epoch = false;
  std::optional<double> target_accuracy;  // of the validation set
  // Stop after this many evaluations in a row without a lower validation loss, and evaluate the
  // best weights on the test set (Keras's EarlyStopping(monitor="val_loss", patience=N,
  // restore_best_weights=True)); 0: off. REQUIRES eval_every > 0.
  int64_t early_stopping_patience = 0;
  bool progress_bar = false;  // the CLI sets it when stdout is a terminal
  // A deliberate straggler (--step_delay_ms): this process sleeps this long before each step.
  int step_delay_ms = 0;
  // Fault injection (--inject_nonfinite_at): this process's own steps, counted from 1, at which
  // its gradient gets a NaN before it leaves, so that tests can watch the ps or the all-reduce
  // step refuse it.
  std::vector<int64_t> nonfinite_gradient_steps;
  // Tests (--record_examples FILE): after every step whose update was applied, this worker appends
  // "STEP EPOCH X X ..." to FILE (FILE.worker<N>.<pid> for worker N of a cluster), X the first
  // feature of
  // each example of its batch: how a test counts which examples an elastic job trained on.
  std::filesystem::path record_examples;
  // --metrics_port (metrics/metrics_endpoint.h): the port this task serves its metrics on (0: a
  // free one), and the address it binds; -1: none.
  int metrics_port = -1;
  std::string metrics_host = "127.0.0.1";
  // Set by a signal (cli/shutdown.h): the run stops at its next step boundary, the chief writes a
  // last checkpoint, and a ps waits at most shutdown_timeout_ms for its workers to leave.
  const StopRequest* stop = nullptr;
  int shutdown_timeout_ms = 20'000;
  // What a checkpoint records of these settings and how the resume check compares them: the run
  // plan derives both from its flag table (plan/recorded_settings.h), which train/ uses without
  // knowing flags, on the settings as they are when it records them. nullptr, a config built by
  // hand (library tests): nothing is recorded, so the resume check has nothing to compare,
  // `dtrain eval` knows only the model's name, and the all-reduce fingerprint covers only what the
  // ring adds.
  const SettingsRecord* recorder = nullptr;
  // Where the run starts when no checkpoint of train_dir says otherwise: these tensors (a model
  // trained before, Python's fit called again) at global step 0, rather than fresh ones from seed.
  // Null: from seed.
  const Checkpoint* initial_state = nullptr;
  // The chief's run log (metrics/run_log.h) goes here too, from the loop's thread. Null: none.
  RunLogSink* observer = nullptr;
  // Who watches the chief's step boundaries and may steer the run from them (Python's fit and its
  // callbacks: train/run_control.h), and the control that makes its orders every worker's, which
  // the in-process run makes from it (plan/in_process_run.h). Null: none.
  RunOwner* owner = nullptr;
  RunControl* control = nullptr;
};

// What a run achieved.
struct TrainResult {
  int64_t global_step = 0;
  int64_t steps_run = 0;     // in this process (after a restore, fewer than global_step)
  double train_seconds = 0;  // training only: evaluation excluded
  double examples_per_second = 0;
  double test_accuracy = 0;
  double final_loss = 0;
  std::optional<double> seconds_to_target;
  // The signal that stopped the run before its end (this process's, or a peer's), 0 if none.
  int halt_signal = 0;
};

// The most global steps a run counts to (the ps protocol's bound too: ps/ps_protocol.h).
inline constexpr int64_t kMostGlobalSteps = int64_t{1} << 62;

// The global step a run stops at: --train_steps, else --epochs of global_steps_per_epoch. Throws
// UsageError naming --epochs when that is more than kMostGlobalSteps.
int64_t total_global_steps(const TrainConfig& config, int64_t global_steps_per_epoch);

// Evaluations happen every this many global steps: --eval_every, else once an epoch with
// eval_each_epoch, else, when a target accuracy is set, four times an epoch (as the reference
// scripts evaluate); 0: only at the end.
int64_t eval_interval(const TrainConfig& config, int64_t global_steps_per_epoch);

// The first multiple of `every` above `step`: when a cadence of `every` global steps next falls
// due. Async ps workers see the global step jump by several at once, so cadences are crossings
// of multiples rather than equalities.
inline int64_t next_multiple(int64_t step, int64_t every) { return (step / every + 1) * every; }

// The learning-rate schedule a run follows: its flags, with a decay_steps of 0 made one epoch of
// global steps (exponential) or the run's total steps (cosine).
LrSchedule lr_schedule_of(const TrainConfig& config, int64_t global_steps_per_epoch,
                          int64_t total_steps);

// The training settings a checkpoint's metadata records: `dtrain eval` rebuilds the model and
// picks the weights to evaluate from them, whatever strategy wrote the checkpoint. What
// config.recorder makes of them; an empty object without one.
nlohmann::json train_config_json(const TrainConfig& config);

}  // namespace dtrain
