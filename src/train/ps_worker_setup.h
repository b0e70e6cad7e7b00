// What a ps worker does once, before its first step (train/ps_strategy.h): the options of its
// client to every ps task, the line that says which way its payloads travel, and the wait of a
// worker that is not the chief for the chief to initialise the ps tasks.
#pragma once

#include <ostream>
#include <string>

#include "ps/ps_client.h"
#include "train/ps_cluster_config.h"
#include "train/train_config.h"
#include "train/training_state.h"

namespace dtrain {

// The client's options for worker `rank`, named `name` in what it reports on `out`. The chief's
// client keeps the state's parameters to re-seed a ps that comes back without a checkpoint.
// REQUIRES: everything named outlives the client.
PsClientOptions ps_client_options(const TrainConfig& train, const PsClusterConfig& config,
                                  const TrainingState& state, int rank, bool chief,
                                  const std::string& name, std::ostream& out);

// "ps0: shm; ps1: tcp (...)": which way gradients and values travel to each ps — the honest
// answer to "is this run using memory or TCP?"
std::string payload_paths(const PsClient& client, size_t ps_tasks);

// Waits until the ps tasks are initialised, saying so every few seconds. Throws StopRequested
// when the run is stopped meanwhile, Error naming the timeout when --peer_timeout passes.
void wait_for_chief(PsClient& client, const TrainConfig& train, const PsClusterConfig& config,
                    const std::string& name, std::ostream& out);

}  // namespace dtrain
