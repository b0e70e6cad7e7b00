// `dtrain train`: flags (the names of the TensorFlow tutorials where they have one) → TrainConfig.
// Flags the user leaves out take the model's recipe (train/recipes.h).
#include <fmt/format.h>
#include <unistd.h>

#include <iostream>

#include "base/cpu.h"
#include "base/error.h"
#include "cli/commands.h"
#include "train/recipes.h"
#include "train/trainer.h"

namespace dtrain::cli {
namespace {

struct TrainFlags {
  std::string model = "mnist_inference";
  std::string strategy = "local";
  int hidden_units = 100;
  int batch_size = 100;
  float learning_rate = 0;
  float lr_decay_rate = 0;
  float moving_average_decay = 0;
  float l2 = 0;
  std::string optimizer;
  int64_t train_steps = 0;
  double epochs = 0;
  std::string data_dir;
  std::string train_dir;
  int64_t validation_size = 5000;
  uint64_t seed = 1;
  int threads = available_cores();
  int towers = 1;
  int64_t log_every = 100;
  int64_t save_steps = 0;
  double save_secs = 0;
  int keep_checkpoints = 5;
  int64_t eval_every = 0;
  double target_accuracy = 0;
  bool progress = true;
};

TrainConfig to_config(const CLI::App& cmd, const TrainFlags& f) {
  TrainConfig c = recipe_for(f.model);
  auto given = [&](const char* name) { return cmd.count(name) > 0; };
  c.model.hidden_units = f.hidden_units;
  if (given("--l2")) c.model.l2 = f.l2;
  if (given("--optimizer")) c.optimizer.name = f.optimizer;
  if (given("--learning_rate")) c.learning_rate = f.learning_rate;
  if (given("--lr_decay_rate")) c.lr_decay_rate = f.lr_decay_rate;
  if (given("--moving_average_decay")) {
    c.moving_average_decay = f.moving_average_decay;
    c.eval_moving_average = f.moving_average_decay > 0;
  }
  if (given("--train_steps")) c.train_steps = f.train_steps;
  if (given("--epochs")) {
    c.epochs = f.epochs;
    if (!given("--train_steps")) c.train_steps = 0;
  }
  c.batch_size = f.batch_size;
  c.data_dir = f.data_dir.empty() ? default_data_dir() : f.data_dir;
  c.train_dir = f.train_dir;
  c.validation_size = f.validation_size;
  c.seed = f.seed;
  c.threads = f.threads;
  c.towers = f.towers;
  c.log_every = f.log_every;
  c.save_steps = f.save_steps;
  c.save_secs = f.save_secs;
  c.keep_checkpoints = f.keep_checkpoints;
  c.eval_every = f.eval_every;
  if (given("--target_accuracy")) {
    c.target_accuracy = f.target_accuracy;
    // Reaching a target needs evaluations; default to four per epoch, as the reference scripts do.
    if (c.eval_every == 0) c.eval_every = std::max<int64_t>(1, 55000 / c.batch_size / 4);
  }
  c.progress_bar = f.progress && isatty(STDOUT_FILENO);
  if (f.strategy == "local" && f.towers > 1) {
    throw UsageError(fmt::format("--towers {} needs --strategy towers", f.towers));
  }
  if (f.strategy == "towers" && !given("--towers")) c.towers = 2;
  return c;
}

}  // namespace

void add_train_command(CLI::App& app, Action& action) {
  auto flags = std::make_shared<TrainFlags>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model (default: mnist_inference, locally)");
  cmd->add_option("--model", flags->model, "softmax | mlp | mnist_inference | lenet")
      ->capture_default_str();
  cmd->add_option("--strategy", flags->strategy, "local | towers")
      ->check(CLI::IsMember({"local", "towers"}))
      ->capture_default_str();
  cmd->add_option("--hidden_units", flags->hidden_units, "Hidden units of the mlp model")
      ->capture_default_str();
  cmd->add_option("--batch_size", flags->batch_size, "Examples per step (per worker)")
      ->capture_default_str();
  cmd->add_option("--learning_rate", flags->learning_rate,
                  "Initial learning rate (default: the model's recipe)");
  cmd->add_option("--lr_decay_rate", flags->lr_decay_rate,
                  "Exponential decay per epoch, staircase (1: none)");
  cmd->add_option("--optimizer", flags->optimizer,
                  "sgd | momentum | adam (default: the model's recipe)");
  cmd->add_option(
      "--moving_average_decay", flags->moving_average_decay,
      "Evaluate on an exponential moving average of the weights with this decay (0: off)");
  cmd->add_option("--l2", flags->l2,
                  "L2 regularisation coefficient on weights (default: the model's)");
  cmd->add_option("--train_steps", flags->train_steps,
                  "Global step to stop at (overrides --epochs)");
  cmd->add_option("--epochs", flags->epochs, "Epochs to train (default: the model's recipe)");
  cmd->add_option("--data_dir", flags->data_dir,
                  "MNIST folder (default $DTRAIN_DATA_DIR or ~/.cache/dtrain/mnist)");
  cmd->add_option("--train_dir", flags->train_dir,
                  "Checkpoints and metrics.jsonl; resumes from it");
  cmd->add_option("--validation_size", flags->validation_size, "Training examples held out")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed of initialisation and shuffling")
      ->capture_default_str();
  cmd->add_option("--threads", flags->threads,
                  "Compute threads that split every large matrix product (default: the cores "
                  "this process may use)")
      ->capture_default_str();
  cmd->add_option("--towers", flags->towers,
                  "Model replicas on separate threads (--strategy towers)")
      ->capture_default_str();
  cmd->add_option("--log_every", flags->log_every, "Print a step line every N steps (0: never)")
      ->capture_default_str();
  cmd->add_option("--save_steps", flags->save_steps,
                  "Checkpoint every N steps (0: at the end only)")
      ->capture_default_str();
  cmd->add_option("--save_secs", flags->save_secs, "Checkpoint every S seconds (0: off)");
  cmd->add_option("--keep_checkpoints", flags->keep_checkpoints, "Checkpoints kept (0: all)")
      ->capture_default_str();
  cmd->add_option("--eval_every", flags->eval_every,
                  "Evaluate test accuracy every N steps (0: at the end)")
      ->capture_default_str();
  cmd->add_option("--target_accuracy", flags->target_accuracy,
                  "Stop once test accuracy reaches this");
  cmd->add_flag("!--no_progress", flags->progress, "No progress bar even on a terminal");
  cmd->callback([cmd, flags, &action] {
    action = [cmd, flags] {
      TrainConfig config = to_config(*cmd, *flags);
      train_local(config, std::cout);
      return 0;
    };
  });
}

}  // namespace dtrain::cli
