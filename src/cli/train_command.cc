// `dtrain train` and `dtrain task`: argv → a run plan (plan/run_plan.h) through the flag table
// (plan/flags.h), run by the one composition root (plan/run.h). Nothing here decides anything.
#include <unistd.h>

#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "cli/commands.h"
#include "cli/shutdown.h"
#include "plan/flags.h"
#include "plan/run.h"
#include "plan/run_plan.h"

namespace dtrain::cli {
namespace {

// One option of the table bound to its field of *values.
template <typename T>
CLI::Option* add_field(CLI::App* cmd, const FlagSpec& flag, T& field) {
  const std::string name(flag.name);
  const std::string help(flag.help);
  if constexpr (std::is_same_v<T, bool>) {
    if (flag.is_switch) return cmd->add_flag(flag.negates ? "!" + name : name, field, help);
  }
  return cmd->add_option(name, field, help);
}

void add_table_flags(CLI::App* cmd, FlagValues* values) {
  for (const FlagSpec& flag : flag_table()) {
    if (std::holds_alternative<std::monostate>(flag.field)) {
      add_data_option_flags(cmd, &values->data_options);
      continue;
    }
    CLI::Option* option = std::visit(
        [&](auto field) -> CLI::Option* {
          if constexpr (std::is_same_v<decltype(field), std::monostate>) {
            return nullptr;
          } else {
            return add_field(cmd, flag, values->*field);
          }
        },
        flag.field);
    if (flag.show_default) option->capture_default_str();
    if (!flag.choices.empty())
      option->check(
          CLI::IsMember(std::vector<std::string>(flag.choices.begin(), flag.choices.end())));
    if (flag.delimiter != 0) option->delimiter(flag.delimiter);
    if (flag.hidden) option->group("");
  }
}

// The table's flags on the command line, each with its value as typed.
std::map<std::string, std::string, std::less<>> given_flags(const CLI::App& cmd) {
  std::map<std::string, std::string, std::less<>> given;
  for (const FlagSpec& flag : flag_table()) {
    if (std::holds_alternative<std::monostate>(flag.field)) continue;
    const std::string name(flag.name);
    if (cmd.count(name) == 0) continue;
    std::string text;
    for (const std::string& part : cmd.get_option(name)->results())
      text += (text.empty() ? "" : ",") + part;
    given[name] = text;
  }
  return given;
}

int run(const CLI::App& cmd, FlagValues flags, Command command) {
  if (flags.data_dir.empty()) flags.data_dir = default_data_dir();
  const RunPlan plan = make_plan(command, flags, given_flags(cmd), train_arguments());
  RunEnvironment environment;
  environment.terminal = isatty(STDOUT_FILENO) != 0;
  environment.handle_signals = [](std::chrono::milliseconds timeout, const std::string& who) {
    auto shutdown = std::make_shared<GracefulShutdown>(timeout, who);
    return std::shared_ptr<const StopRequest>(shutdown, &shutdown->request());
  };
  return run_plan(plan, environment, std::cout);
}

// train and task read a launcher's ranks alike; both say how in --help.
constexpr const char* kLauncherHelp =
    "\nUnder a launcher each process is one rank of one job: mpirun (Open MPI's "
    "OMPI_COMM_WORLD_RANK/SIZE, MPICH's PMI_RANK/PMI_SIZE), srun (SLURM_PROCID/SLURM_NTASKS) or "
    "torchrun-style RANK/WORLD_SIZE. The ranks meet at --rendezvous, else MASTER_ADDR:MASTER_PORT, "
    "else the Slurm job's first node, else 127.0.0.1 when every rank is on this host (port: "
    "MASTER_PORT or 29500). Every rank is an all-reduce worker, or --ps P makes ranks 0..P-1 ps "
    "tasks (--strategy async|sync). Every rank needs the same secret: export "
    "DTRAIN_SECRET=$(openssl rand -hex 32) before launching, or --secret_file FILE.";

void add_run_command(CLI::App& app, Action& action, Command command, const char* name,
                     const char* description) {
  auto flags = std::make_shared<FlagValues>();
  CLI::App* cmd = app.add_subcommand(name, description);
  cmd->footer(kLauncherHelp);
  add_table_flags(cmd, flags.get());
  cmd->callback([cmd, flags, command, &action] {
    action = [cmd, flags, command] { return run(*cmd, *flags, command); };
  });
}

}  // namespace

void add_train_command(CLI::App& app, Action& action) {
  add_run_command(
      app, action, Command::kTrain, "train",
      "Train a model: locally (default), or a cluster on this machine (--strategy async|sync: "
      "parameter servers; allreduce: a ring of workers), or one task of a cluster given by "
      "flags/TF_CONFIG or a launcher's ranks (mpirun, srun, torchrun)");
}

void add_task_command(CLI::App& app, Action& action) {
  add_run_command(
      app, action, Command::kTask, "task",
      "Run one task (ps or worker) of a cluster given by --ps_hosts/--worker_hosts/"
      "--job_name/--task_index, TF_CONFIG or --cluster; a cluster without ps tasks trains by "
      "all-reduce; or one rank of a launcher's job (mpirun, srun, torchrun)");
}

}  // namespace dtrain::cli
