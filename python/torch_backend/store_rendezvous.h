// How the ranks of a torch.distributed group find each other: through the c10d::Store that
// init_process_group hands the backend (prefixed per group by torch), each rank publishes where
// it listens and reads every other rank's, and the ring forms as dtrain.distributed's does.
#pragma once

#include <chrono>
#include <memory>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "collective/rank_group.h"

namespace dtrain::torch_backend {

// This rank's RankGroup, formed through `store`. The cluster secret is DTRAIN_SECRET when set,
// as every rank must then have; otherwise rank 0 makes one and seals it to each rank's ephemeral
// key through the store (cluster/store_secret.h), which never holds the secret itself.
// The address published is this host's as seen from the store's host (a TCPStore's), or
// 127.0.0.1 for a store that has no host (FileStore, HashStore: ranks of one host).
// Throws what RankGroup throws, and the store's errors (its timeout) as they come.
std::unique_ptr<RankGroup> join_through_store(const c10::intrusive_ptr<c10d::Store>& store,
                                              int rank, int world_size,
                                              std::chrono::milliseconds timeout);

}  // namespace dtrain::torch_backend
