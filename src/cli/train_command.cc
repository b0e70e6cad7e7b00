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
#include "plan/flag_parser.h"
#include "plan/run.h"
#include "plan/run_plan.h"

namespace dtrain::cli {
namespace {

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
  add_flag_options(cmd, flags.get());
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
