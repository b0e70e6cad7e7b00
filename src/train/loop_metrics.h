// --metrics_port for a training loop: the task's endpoint (metrics/metrics_endpoint.h), its
// Prometheus series, and what feeds its live page at / — the task's own steps, the strategy's
// report of every worker, and (through board_sink) the chief's run log, the run's series.
#pragma once

#include <memory>
#include <ostream>
#include <string>

#include "metrics/metrics_endpoint.h"
#include "metrics/run_log.h"
#include "metrics/training_metrics.h"
#include "train/strategy.h"
#include "train/train_config.h"

namespace dtrain {

class LoopMetrics {
 public:
  // Listens on --metrics_host:--metrics_port (MetricsEndpoint's errors), hands `strategy` the
  // observers of its collectives and workers, and says where it serves on `out`, after `prefix`.
  // REQUIRES: strategy outlives this, or calls its observers no more once this is gone.
  LoopMetrics(const TrainConfig& config, const WorkerPlace& place, Strategy& strategy,
              std::ostream& out, const std::string& prefix);
  LoopMetrics(const LoopMetrics&) = delete;
  LoopMetrics& operator=(const LoopMetrics&) = delete;

  TrainingMetrics& training() { return training_; }
  // A run log sink that gives the live page the run's series. REQUIRES: used while this lives.
  std::unique_ptr<RunLogSink> board_sink() {
    return std::make_unique<RunBoardSink>(endpoint_.board());
  }

 private:
  MetricsEndpoint endpoint_;
  TrainingMetrics training_;  // reads endpoint_
};

}  // namespace dtrain
