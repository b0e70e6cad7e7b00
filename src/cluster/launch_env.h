// A task's rank and world from the launcher that started it: Open MPI's and MPICH's mpirun,
// Slurm's srun, or torchrun-style variables, and where the ranks meet (the rendezvous). Reads no
// environment itself: callers pass a lookup, so that tests need not set the process's own.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "cluster/cluster_spec.h"

namespace dtrain {

// Slurm's and torchrun's default rendezvous port (torch.distributed's MASTER_PORT default).
inline constexpr uint16_t kDefaultRendezvousPort = 29500;

struct LaunchEnv {
  // Which launcher, with the variables read: "Open MPI (OMPI_COMM_WORLD_RANK, ...)".
  std::string source;
  int rank = 0;
  int world_size = 0;
  const char* world_size_variable = "";  // "OMPI_COMM_WORLD_SIZE", for messages
  int local_rank = 0;
  // Where rank 0 listens for the others, and what said so ("--rendezvous", "MASTER_ADDR and
  // MASTER_PORT", "the first host of SLURM_JOB_NODELIST").
  HostPort rendezvous;
  std::string rendezvous_source;
};

// The value of an environment variable, or nullopt when it is unset.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

// The process's own environment.
EnvLookup process_env();

// The first launcher whose variables are set, in this order: Open MPI (OMPI_COMM_WORLD_RANK,
// OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK); MPICH's PMI (PMI_RANK, PMI_SIZE,
// MPI_LOCALRANKID); Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID); torchrun (RANK, WORLD_SIZE,
// LOCAL_RANK). MPI comes before Slurm: inside an sbatch job, the processes mpirun starts all see
// SLURM_PROCID=0. nullopt when none is set.
//
// The rendezvous: `rendezvous_flag` (--rendezvous HOST[:PORT]) if given; else MASTER_ADDR with
// MASTER_PORT; else, inside a Slurm job, the first host of SLURM_JOB_NODELIST; else, when the
// launcher says every rank is on this host (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS or
// LOCAL_WORLD_SIZE equal to the world, or SLURM_STEP_NUM_NODES=1), 127.0.0.1. The port is
// MASTER_PORT if set, else kDefaultRendezvousPort. A world of one task has no rendezvous.
//
// Throws UsageError naming the variable or flag at fault: a rank or size that is not a number, a
// rank outside the world, no rendezvous to be found.
std::optional<LaunchEnv> launch_env_from(const EnvLookup& env, const std::string& rendezvous_flag);

}  // namespace dtrain
