// The daemons run in the foreground as children of the test (never daemonised), so that the test
// owns, signals and reaps them like any other child. Their ports are picked free, so two suites
// on one machine do not meet; munged's socket is the folder's, not the system's.
#include "support/slurm_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "cluster/free_ports.h"

namespace dtrain::testing {
namespace {

// Debian installs the daemons in /usr/sbin, which a non-login PATH may lack.
std::string find_program(const std::string& name) {
  for (const char* dir : {"/usr/sbin", "/usr/bin", "/sbin", "/bin"}) {
    const std::filesystem::path path = std::filesystem::path(dir) / name;
    if (::access(path.c_str(), X_OK) == 0) return path.string();
  }
  return "";
}

}  // namespace

std::string OneNodeSlurm::unavailable() {
  if (::geteuid() != 0) return "needs root, to run munged, slurmctld and slurmd without systemd";
  for (const char* program : {"munged", "slurmctld", "slurmd", "srun"}) {
    if (find_program(program).empty()) {
      return std::string(program) + " is not installed (Debian packages slurm-wlm and munge)";
    }
  }
  return "";
}

OneNodeSlurm::OneNodeSlurm() {
  {
    // munged refuses a key that others may read.
    std::ofstream key(dir_ / "munge.key", std::ios::binary);
    std::ifstream random("/dev/urandom", std::ios::binary);
    std::vector<char> bytes(1024);
    random.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    key.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  std::filesystem::permissions(dir_ / "munge.key", std::filesystem::perms::owner_read);
  std::filesystem::create_directory(dir_ / "state");
  std::filesystem::create_directory(dir_ / "spool");
  write_config();
  const std::string d = dir_.path().string();
  // --force: munged otherwise refuses to run as root.
  start(
      "munged",
      {"--foreground", "--force", "--key-file=" + d + "/munge.key", "--socket=" + d + "/munge.sock",
       "--pid-file=" + d + "/munged.pid", "--seed-file=" + d + "/munge.seed"},
      "work threads");
  start("slurmctld", {"-D", "-f", d + "/slurm.conf"}, "Running as primary controller");
  start("slurmd", {"-D", "-N", "localhost", "-f", d + "/slurm.conf"}, "slurmd started on");
}

OneNodeSlurm::~OneNodeSlurm() {
  for (auto daemon = daemons_.rbegin(); daemon != daemons_.rend(); ++daemon) {
    (*daemon)->send_signal(SIGTERM);
    (*daemon)->wait();
  }
}

std::vector<std::string> OneNodeSlurm::env() const {
  return {"SLURM_CONF=" + (dir_ / "slurm.conf").string()};
}

void OneNodeSlurm::write_config() const {
  const std::vector<uint16_t> ports = pick_free_ports(2);
  const std::string d = dir_.path().string();
  std::ofstream conf(dir_ / "slurm.conf");
  conf << "ClusterName=dtraintest\n"
       << "SlurmctldHost=localhost\n"
       << "SlurmUser=root\nSlurmdUser=root\n"
       << "AuthType=auth/munge\nCredType=cred/munge\n"
       << "AuthInfo=socket=" << d << "/munge.sock\n"
       << "SlurmctldPort=" << ports[0] << "\nSlurmdPort=" << ports[1] << "\n"
       << "StateSaveLocation=" << d << "/state\nSlurmdSpoolDir=" << d << "/spool\n"
       << "SlurmctldPidFile=" << d << "/slurmctld.pid\nSlurmdPidFile=" << d
       << "/slurmd.pid\n"
       // Without systemd or cgroups: processes tracked by their parentage, no task binding.
       << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
       << "MpiDefault=none\nSwitchType=switch/none\n"
       << "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
       << "ReturnToService=2\nJobCompType=jobcomp/none\n"
       << "AccountingStorageType=accounting_storage/none\n"
       << "NodeName=localhost CPUs=2 State=UNKNOWN\n"
       << "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP "
          "OverSubscribe=YES\n";
}

void OneNodeSlurm::start(const std::string& program, const std::vector<std::string>& args,
                         const std::string& ready) {
  DtrainProcess::Options options;
  options.program = find_program(program);
  // Their logs go to stderr in the foreground: folded into stdout, where lines are waited for.
  options.prefix = {"sh", "-c", "exec \"$0\" \"$@\" 2>&1"};
  options.extra_env = env();
  auto daemon = std::make_unique<DtrainProcess>(args, options);
  if (daemon->wait_for_line(ready).empty()) {
    const ProcessResult result = daemon->wait(std::chrono::seconds(1));
    throw std::runtime_error(program + " did not start: " + result.out + result.err);
  }
  daemons_.push_back(std::move(daemon));
}

}  // namespace dtrain::testing
