// Flags → plan: the model's recipe, then each flag that was given.
#include "plan/run_plan.h"

#include <fmt/format.h>

#include <cmath>

#include "base/error.h"
#include "data/data_files.h"
#include "nn/model_zoo.h"
#include "plan/flags.h"
#include "plan/recipes.h"
#include "plan/recorded_settings.h"

namespace dtrain {
namespace {

LrDecay parse_lr_schedule(const std::string& name) {
  if (name == "cosine") return LrDecay::kCosine;
  if (name == "piecewise") return LrDecay::kPiecewise;
  return LrDecay::kExponential;
}

// The flags of one schedule mean nothing under another; the table's checks judge the values.
void apply_schedule(const RunPlan& p, TrainConfig& c) {
  const FlagValues& f = p.flags;
  c.lr_schedule = parse_lr_schedule(f.lr_schedule);
  auto refuse = [&](const char* flag, const char* why) {
    if (!p.has(flag)) return;
    throw UsageError(
        fmt::format("{} {}: {} (--lr_schedule {})", flag, p.text_of(flag), why, f.lr_schedule));
  };
  if (c.lr_schedule != LrDecay::kExponential)
    refuse("--lr_decay_rate", "only the exponential schedule has a decay rate");
  if (c.lr_schedule == LrDecay::kPiecewise) {
    refuse("--learning_rate", "the piecewise schedule takes its rates from --lr_values");
    refuse("--lr_decay_steps", "the piecewise schedule changes at --lr_boundaries");
  }
  c.lr_decay_steps = f.lr_decay_steps;
  c.lr_alpha = f.lr_alpha;
  c.lr_boundaries = f.lr_boundaries;
  c.lr_values = f.lr_values;
  c.lr_warmup_steps = f.lr_warmup_steps;
}

// The optimizer's hyper-parameter flags. Momentum, epsilon and weight decay default by optimizer
// (optimizer_defaults), so they are set only when given; the others have one default.
void apply_optimizer_flags(const RunPlan& p, OptimizerConfig& o) {
  const FlagValues& f = p.flags;
  if (p.has("--momentum")) o.momentum = f.momentum;
  if (p.has("--epsilon")) o.epsilon = f.epsilon;
  if (p.has("--weight_decay")) o.weight_decay = f.weight_decay;
  o.use_nesterov = f.nesterov;
  o.beta1 = f.beta_1;
  o.beta2 = f.beta_2;
  o.rho = f.rho;
  o.centered = f.centered;
  o.initial_accumulator_value = f.initial_accumulator_value;
  o.clipnorm = f.clipnorm;
  o.global_clipnorm = f.global_clipnorm;
  o.clipvalue = f.clipvalue;
}

// The flags, with the model's recipe (plan/recipes.h) in place of those that were not given.
TrainConfig config_of(const RunPlan& p) {
  TrainConfig c;
  c.model.name = p.flags.model;
  // The one read of the model's file in a run: every later use shares it through c.model.
  resolve_model(c.model);
  const std::string source = model_source_name(c.model.name);
  const auto given = [&](std::string_view flag) { return p.has(flag); };
  FlagValues f = p.flags;
  apply_recipe(*c.model.source, source, f, given);
  set_recipe_settings(f, c);
  apply_optimizer_flags(p, c.optimizer);
  apply_compiled_optimizer(*c.model.source, source, given, c);
  c.model.hidden_units = f.hidden_units;
  if (p.has("--l2")) c.model.l2 = f.l2;
  apply_schedule(p, c);
  c.train_steps = f.train_steps;
  c.batch_size = f.batch_size;
  c.data_dir = f.data_dir;  // the CLI fills in the default folder
  c.train_data = f.train_data;
  c.test_data = f.test_data;
  c.data_options = f.data_options;
  c.shuffle_buffer = f.shuffle_buffer;
  c.train_dir = f.train_dir;
  c.logdir = f.logdir;
  c.summary_steps = f.summary_steps;
  // MNIST holds out its first 5000 training examples, as TensorFlow's read_data_sets does; a
  // user's own files are trained on whole unless told otherwise.
  c.validation_size = p.has("--validation_size") || f.train_data.empty() ? f.validation_size : 0;
  c.seed = f.seed;
  c.threads = f.threads;
  c.towers = f.towers;
  c.precision = parse_precision(f.precision);  // one of the row's choices
  if (p.strategy == StrategyKind::kTowers && !p.has("--towers")) c.towers = 2;
  c.log_every = f.log_every;
  c.log_secs = f.log_secs;
  c.save_steps = f.save_steps;
  c.save_secs = f.save_secs;
  c.keep_checkpoints = f.keep_checkpoints;
  c.shutdown_timeout_ms = static_cast<int>(std::lround(f.shutdown_timeout * 1000));
  c.eval_every = f.eval_every;
  // Without --eval_every, a target is checked four times an epoch (train/training_loop.h).
  if (p.has("--target_accuracy")) c.target_accuracy = f.target_accuracy;
  c.early_stopping_patience = f.early_stopping_patience;
  c.eval_each_epoch = f.eval_each_epoch;
  c.nonfinite_gradient_steps = f.inject_nonfinite_at;
  c.step_delay_ms = f.step_delay_ms;
  c.record_examples = f.record_examples;
  c.metrics_port = f.metrics_port;
  c.recorder = &settings_record();
  check_recipe(*c.model.source, source, c, given);
  return c;
}

ResumeMode resume_mode(const FlagValues& f) {
  if (f.resume && f.overwrite) {
    throw UsageError(
        "--resume and --overwrite: choose one (go on from the checkpoint, or start "
        "afresh)");
  }
  return f.overwrite ? ResumeMode::kOverwrite
         : f.resume  ? ResumeMode::kResume
                     : ResumeMode::kDefault;
}

}  // namespace

std::string RunPlan::text_of(std::string_view flag) const {
  const auto it = given.find(flag);
  return it == given.end() ? std::string() : it->second;
}

RunPlan make_plan(Command command, const FlagValues& flags,
                  std::map<std::string, std::string, std::less<>> given,
                  std::vector<std::string> arguments) {
  RunPlan plan;
  plan.command = command;
  plan.flags = flags;
  plan.given = std::move(given);
  plan.arguments = std::move(arguments);
  plan.strategy = parse_strategy(flags.strategy);
  plan.config = config_of(plan);
  check_flags(plan, CheckWhen::kAlways, plan.strategy);
  plan.resume = resume_mode(flags);
  return plan;
}

void validate_train_config(const TrainConfig& config) {
  RunPlan plan;
  plan.config = config;
  check_flags(plan, CheckWhen::kAlways, plan.strategy);
}

int global_batch_of(const RunPlan& plan, StrategyKind kind, int workers) {
  const int batch = plan.config.batch_size;
  switch (kind) {
    case StrategyKind::kAllreduce:
      return batch * workers;
    case StrategyKind::kSync:
      return batch *
             (plan.flags.replicas_to_aggregate > 0 ? plan.flags.replicas_to_aggregate : workers);
    default:
      return batch;
  }
}

}  // namespace dtrain
