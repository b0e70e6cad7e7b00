// A one-node Slurm cluster of this machine, started by a test as root without systemd: munged,
// slurmctld and slurmd (Debian's slurm-wlm and munge) in the foreground, with their key, state,
// ports and sockets in a temporary folder of their own. srun given env() runs on it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/temp_dir.h"

namespace dtrain::testing {

class OneNodeSlurm {
 public:
  // "" when one can run here; else why not (not root, a daemon not installed), for GTEST_SKIP.
  static std::string unavailable();

  // Starts the three daemons and returns once slurmd has started; throws std::runtime_error with
  // their output if one does not come up.
  OneNodeSlurm();
  ~OneNodeSlurm();  // stops them (SIGTERM) and reaps them
  OneNodeSlurm(const OneNodeSlurm&) = delete;
  OneNodeSlurm& operator=(const OneNodeSlurm&) = delete;

  // What srun, sinfo or scontrol needs in its environment to use this cluster: SLURM_CONF.
  std::vector<std::string> env() const;

 private:
  void write_config() const;
  // Starts `program` with `args`, its stderr folded into stdout, and waits for a line with `ready`.
  void start(const std::string& program, const std::vector<std::string>& args,
             const std::string& ready);

  TempDir dir_;
  std::vector<std::unique_ptr<DtrainProcess>> daemons_;  // in start order; stopped in reverse
};

}  // namespace dtrain::testing
