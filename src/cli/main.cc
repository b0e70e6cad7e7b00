// dtrain: entry point. Parses the command line, runs one subcommand, and turns failures into one
// line on stderr and an exit code: 2 for a bad flag or value, 1 for anything else.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/failure_text.h"
#include "cli/help_format.h"
#include "plan/flag_parser.h"
#include "tensor/blas_kernels.h"

namespace {

// The line in one write: cerr is unbuffered, and a launcher that stops this task right after it
// fails must not relay half a line.
void print_error(const char* what) {
  const std::string line = fmt::format("dtrain: error: {}\n", what);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace

int main(int argc, char** argv) {
  dtrain::choose_blas_kernels(argv);
  CLI::App app{
      "dtrain: distributed neural-network training (parameter servers, all-reduce, towers)"};
  app.require_subcommand(1);
  app.formatter(std::make_shared<dtrain::cli::HelpFormatter>());
  dtrain::cli::Action action;
  dtrain::cli::add_train_command(app, action);
  dtrain::cli::add_eval_command(app, action);
  dtrain::cli::add_bench_command(app, action);
  dtrain::cli::add_task_command(app, action);
  dtrain::cli::add_convert_command(app, action);
  dtrain::cli::add_models_command(app, action);
  dtrain::cli::add_export_command(app, action);
  dtrain::cli::add_predict_command(app, action);
  dtrain::cli::add_plot_command(app, action);
  dtrain::cli::add_version_command(app, action);
  dtrain::cli::set_command_line(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const CLI::App* command = app.get_subcommands().empty() ? &app : app.get_subcommands()[0];
    std::cerr << fmt::format("dtrain: error: {} (see dtrain {}--help)\n",
                             dtrain::parse_error_message(*command, e),
                             command == &app ? "" : command->get_name() + " ");
    return 2;
  }
  try {
    return action ? action() : 2;
  } catch (const dtrain::UsageError& e) {
    print_error(e.what());
    return 2;
  } catch (const std::exception& e) {
    print_error(dtrain::cli::failure_text(e).c_str());
    return 1;
  }
}
