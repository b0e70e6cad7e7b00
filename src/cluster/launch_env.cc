// Each launcher is a row of variable names; the first row whose rank variable is set wins, and its
// other variables must then be set and sane too, so that a half-set environment is an error that
// names the missing variable rather than a silent fall-through to the next launcher.
#include "cluster/launch_env.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cstdlib>

#include "base/error.h"
#include "cluster/slurm_hostlist.h"

namespace dtrain {
namespace {

struct Launcher {
  const char* name;
  const char* rank;
  const char* size;
  const char* local_rank;  // may be unset: 0 then
  // What says every rank shares this host: a count of this host's ranks that equals the world,
  // or (Slurm) a count of nodes that is 1. May be unset: not known then.
  const char* on_this_host;
  bool counts_nodes;
};

constexpr std::array<Launcher, 4> kLaunchers = {{
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", false},
    {"MPICH (PMI)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", false},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_STEP_NUM_NODES", true},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", false},
}};

int number_from(const EnvLookup& env, const char* name, int lowest) {
  const std::optional<std::string> text = env(name);
  if (!text) throw UsageError(fmt::format("{} is not set", name));
  int value = 0;
  const char* end = text->data() + text->size();
  const auto [ptr, ec] = std::from_chars(text->data(), end, value);
  if (text->empty() || ec != std::errc() || ptr != end || value < lowest) {
    throw UsageError(
        fmt::format("{}={}: expected a whole number of at least {}", name, *text, lowest));
  }
  return value;
}

// Whether the launcher says that every rank runs on this host.
bool all_ranks_on_this_host(const EnvLookup& env, const Launcher& launcher, int world_size) {
  if (!env(launcher.on_this_host)) return false;
  const int count = number_from(env, launcher.on_this_host, 1);
  return launcher.counts_nodes ? count == 1 : count == world_size;
}

// "host:port" for MASTER_ADDR, which may be a bare IPv6 address.
std::string joined(const std::string& host, const std::string& port) {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port)
                                             : fmt::format("{}:{}", host, port);
}

std::string port_text(const EnvLookup& env) {
  const std::optional<std::string> port = env("MASTER_PORT");
  return port && !port->empty() ? *port : std::to_string(kDefaultRendezvousPort);
}

void find_rendezvous(const EnvLookup& env, const std::string& flag, const Launcher& launcher,
                     LaunchEnv& launch) {
  if (!flag.empty()) {
    launch.rendezvous = parse_host_port("--rendezvous", flag);
    launch.rendezvous_source = "--rendezvous";
    return;
  }
  if (const auto host = env("MASTER_ADDR"); host && !host->empty()) {
    launch.rendezvous = parse_host_port("MASTER_ADDR/MASTER_PORT", joined(*host, port_text(env)));
    launch.rendezvous_source = env("MASTER_PORT") ? "MASTER_ADDR and MASTER_PORT" : "MASTER_ADDR";
    return;
  }
  if (const auto nodes = env("SLURM_JOB_NODELIST"); nodes && !nodes->empty()) {
    const std::string first = expand_slurm_hostlist(*nodes, "SLURM_JOB_NODELIST").front();
    launch.rendezvous = parse_host_port("SLURM_JOB_NODELIST", joined(first, port_text(env)));
    launch.rendezvous_source = "the first host of SLURM_JOB_NODELIST";
    return;
  }
  // mpirun -np 4 on one machine sets no MASTER_ADDR, and needs none.
  if (all_ranks_on_this_host(env, launcher, launch.world_size)) {
    launch.rendezvous = parse_host_port("MASTER_PORT", joined("127.0.0.1", port_text(env)));
    launch.rendezvous_source =
        fmt::format("every rank on this host, as {} says", launcher.on_this_host);
    return;
  }
  throw UsageError(fmt::format(
      "{} gives this task rank {} of {}, but not where the ranks meet: give --rendezvous "
      "HOST:PORT, or set MASTER_ADDR (and MASTER_PORT) to rank 0's host",
      launch.source, launch.rank, launch.world_size));
}

}  // namespace

EnvLookup process_env() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

std::optional<LaunchEnv> launch_env_from(const EnvLookup& env, const std::string& rendezvous_flag) {
  for (const Launcher& launcher : kLaunchers) {
    if (!env(launcher.rank)) continue;
    LaunchEnv launch;
    launch.source = fmt::format("{} ({}, {})", launcher.name, launcher.rank, launcher.size);
    launch.rank = number_from(env, launcher.rank, 0);
    launch.world_size = number_from(env, launcher.size, 1);
    launch.local_rank = env(launcher.local_rank) ? number_from(env, launcher.local_rank, 0) : 0;
    if (launch.rank >= launch.world_size) {
      throw UsageError(fmt::format("{}={}: outside the world of {}={} tasks", launcher.rank,
                                   launch.rank, launcher.size, launch.world_size));
    }
    launch.world_size_variable = launcher.size;
    // A world of one has no one to meet.
    if (launch.world_size > 1) find_rendezvous(env, rendezvous_flag, launcher, launch);
    return launch;
  }
  return std::nullopt;
}

}  // namespace dtrain
