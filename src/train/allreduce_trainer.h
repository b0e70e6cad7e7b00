// One worker of an all-reduce cluster (strategy `allreduce`, DESIGN.md §2 and §6): every worker
// is equal, holds a full replica of the parameters and the optimizer state, and after each step's
// averaged gradient is applied on every replica, all replicas hold bitwise identical parameters.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "cluster/cluster_spec.h"
#include "comm/peer_memory.h"
#include "nn/param_set.h"
#include "train/task_strategy.h"
#include "train/train_config.h"
#include "train/training_input.h"
#include "train/training_state.h"

namespace dtrain {

struct AllreduceClusterConfig {
  ClusterConfig cluster;  // the training workers (no ps tasks) and this task
  std::string secret;     // the cluster secret, raw bytes
  // 0: each step's gradients are one all-reduce over the whole gradient arena. Otherwise buckets
  // of at most this many bytes (whole tensors where they fit; a larger tensor alone, cut into
  // pieces of this size), each all-reduced in turn. Every worker must use the same value.
  size_t fusion_bytes = 0;
  // The largest message of a collective (CollectiveOptions::max_chunk_bytes).
  size_t chunk_bytes = 512 * 1024;
  // How long a worker waits for the ring to form and for any message once it has: a lost or
  // stuck worker fails every other within this time, with an error naming it.
  int collective_timeout_ms = 60'000;
  // How chunks reach a worker on the same host (--transport; comm/peer_memory.h).
  Transport transport = Transport::kAuto;
};

// A contiguous slice [begin, begin + size) of a ParamSet's flat() arena.
struct ArenaSlice {
  size_t begin = 0;
  size_t size = 0;
  bool operator==(const ArenaSlice&) const = default;
};

// The fusion buckets of an arena with this layout: slices that cover flat() exactly, in order,
// each at most fusion_bytes long (in whole floats, at least one). Consecutive tensors share a
// bucket while they fit; a tensor longer than a bucket is cut into bucket-sized pieces, its last
// piece then shared with what follows. The padding after a tensor goes with it. fusion_bytes 0:
// one bucket, the whole arena. A pure function of its arguments, so every worker cuts the same.
std::vector<ArenaSlice> fusion_buckets(const ParamSet& layout, size_t fusion_bytes);

// Checks the cluster before anything is loaded: a secret, no ps tasks, this task a worker. Throws
// UsageError naming what is wrong.
void begin_allreduce_task(const AllreduceClusterConfig& config);

// The strategy of the worker config.cluster.task names, over state and input, printing its
// start-up line, step lines and, at the end, its test accuracy, training time and the CRC32C of
// its parameters; whoever holds it keeps train, config, state, input and out alive. Its abort tells
// the other workers, so they stop at once instead of after the timeout.
// REQUIRES: begin_allreduce_task(config) passed; every worker of the cluster started with the same
// training flags (those that differ are refused by the ring's fingerprint).
TaskStrategy make_allreduce_strategy(const TrainConfig& train, const AllreduceClusterConfig& config,
                                     TrainingState& state, const TrainingInput& input,
                                     std::ostream& out);

}  // namespace dtrain
