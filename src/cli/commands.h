// The subcommands of the dtrain binary. Each adds itself to the CLI11 app and returns the action to
// run once the command line has parsed; the action returns the process's exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/cluster_secret.h"
#include "data/data_options.h"
#include "plan/data_flags.h"
#include "train/evaluate.h"

namespace dtrain::cli {

using Action = std::function<int()>;

// `action` is set when the subcommand is chosen on the command line.
void add_train_command(CLI::App& app, Action& action);
void add_eval_command(CLI::App& app, Action& action);
void add_bench_command(CLI::App& app, Action& action);
void add_task_command(CLI::App& app, Action& action);
void add_convert_command(CLI::App& app, Action& action);
void add_models_command(CLI::App& app, Action& action);
void add_export_command(CLI::App& app, Action& action);
void add_predict_command(CLI::App& app, Action& action);
void add_plot_command(CLI::App& app, Action& action);
// Also --version on app itself.
void add_version_command(CLI::App& app, Action& action);

// The command line as main() received it, for the local launcher to pass on to its tasks.
void set_command_line(int argc, char** argv);
// The arguments after the subcommand's name.
std::vector<std::string> train_arguments();
// --moving_average and --raw_weights (which exclude each other), setting *weights when given;
// without either it keeps its value (kAsTrained: the weights the training run evaluated).
void add_weights_flags(CLI::App* cmd, const std::shared_ptr<CheckpointWeights>& weights,
                       const std::string& verb);

// Throws UsageError naming both when `output` (the value of `flag`) would replace the checkpoint
// file that was read, or a checkpoint or the index in its folder: writing there through a rename
// would destroy the run that the output is made from.
void refuse_output_over_checkpoint(std::string_view flag, const std::filesystem::path& output,
                                   const std::filesystem::path& checkpoint);

// Where MNIST lives unless --data_dir says otherwise: $DTRAIN_DATA_DIR, else ~/.cache/dtrain/mnist.
std::string default_data_dir();

}  // namespace dtrain::cli
