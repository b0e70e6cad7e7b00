// A ps task of the ps strategies (DESIGN.md §5), runnable in any process: its shards, restored
// from --train_dir's newest checkpoint where there is one, served to the workers until each is
// done: what run_ps_service runs, and what tests run beside worker threads. A task whose flags
// name no model (PsClusterConfig::given_flags) learns what it serves from the chief.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

#include "metrics/metrics_endpoint.h"
#include "ps/ps_service.h"
#include "train/ps_cluster_config.h"
#include "train/train_config.h"

namespace dtrain {

class PsTaskServer {
 public:
  // Restores, allocates and starts listening on the task's address (config.cluster.task, a ps
  // task; port 0: any free one, which port() tells), and prints where. Throws UsageError,
  // TransportError. REQUIRES: train outlives the server.
  PsTaskServer(const TrainConfig& train, const PsClusterConfig& config, std::ostream& out);
  ~PsTaskServer();
  PsTaskServer(const PsTaskServer&) = delete;
  PsTaskServer& operator=(const PsTaskServer&) = delete;

  uint16_t port() const { return service_->port(); }
  // Serves until every training worker is done (PsService::run), then prints what it did.
  // Returns the exit code: 0, or 128 + the signal that stopped it (train.stop).
  int serve();

 private:
  const TrainConfig& train_;
  std::ostream& out_;
  // What it serves, once known: "serving N shards of <model>, sync for W workers".
  void say_serving(const PsServiceOptions& options);

  const int ps_;
  std::string model_;  // the model's name, once known (from a connection's thread, then fixed)
  std::unique_ptr<PsService> service_;
  // --metrics_port: goes before the service its collector reads.
  std::unique_ptr<MetricsEndpoint> metrics_;
};

}  // namespace dtrain
