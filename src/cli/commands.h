// The subcommands of the dtrain binary. Each adds itself to the CLI11 app and returns the action to
// run once the command line has parsed; the action returns the process's exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>

namespace dtrain::cli {

using Action = std::function<int()>;

// `action` is set when the subcommand is chosen on the command line.
void add_train_command(CLI::App& app, Action& action);
void add_eval_command(CLI::App& app, Action& action);
void add_bench_command(CLI::App& app, Action& action);

// Where MNIST lives unless --data_dir says otherwise: $DTRAIN_DATA_DIR, else ~/.cache/dtrain/mnist.
std::string default_data_dir();

}  // namespace dtrain::cli
