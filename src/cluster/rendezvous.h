// Where ranks that know only their number find each other (launchers such as mpirun, srun and
// torchrun give no address list): rank 0 listens at the rendezvous address, every rank registers
// the host:port its task will listen on, and rank 0 answers each with every rank's address. The
// connections authenticate with the cluster secret like every other connection of a cluster.
#pragma once

#include <string>
#include <vector>

#include "cluster/cluster_spec.h"
#include "comm/tcp_congestion.h"

namespace dtrain {

struct RendezvousOptions {
  HostPort address;    // rank 0's rendezvous address
  std::string source;  // what named it, for errors: "MASTER_ADDR and MASTER_PORT"
  int rank = 0;
  int world_size = 0;
  std::string secret;  // the cluster secret, raw bytes
  bool authenticate_frames = true;
  std::string tcp_congestion = kTcpCongestionAuto;  // ConnectionOptions::tcp_congestion
  // How long rank 0 waits for every rank to register, and how long another rank tries to reach
  // rank 0 and then waits for the answer.
  int timeout_ms = 600'000;
  std::string bind;  // --bind: where rank 0's rendezvous listens (default: as a task would)
  // Rank 0: a port on the rendezvous host where it will serve an elastic job's coordinator
  // (cluster/membership_service.h), announced to every rank with the addresses; 0: none.
  uint16_t coordinator_port = 0;
};

// Every rank's task address, indexed by rank; this rank's is a free port on the address it
// reaches rank 0 from (rank 0's: on the rendezvous host). Throws Error with the one message every
// rank ends with when the rendezvous fails: a rank that did not register in time, a rank number
// registered twice, a rank that disagrees on the world size (each named, with its address).
// AuthError when this rank's secret is not rank 0's.
// `coordinator_port`, if not null, receives the port rank 0 announced (0 if none).
std::vector<HostPort> rendezvous(const RendezvousOptions& options,
                                 uint16_t* coordinator_port = nullptr);

// A port nothing listens on at `host` now (bound to port 0 and released), for a listener this
// process starts shortly after. Throws TransportError if host is not an address of this host.
uint16_t free_port_on(const std::string& host);

// The cluster of a rendezvous: ranks 0..ps-1 are the ps tasks, the others the workers, in rank
// order (so the chief, worker 0, is rank ps). Validated like every cluster.
ClusterConfig cluster_of_ranks(const std::vector<HostPort>& ranks, int rank, int ps);

// How many of the ranks share this rank's host: the ranks that split its cores.
int ranks_on_host_of(const std::vector<HostPort>& ranks, int rank);

}  // namespace dtrain
