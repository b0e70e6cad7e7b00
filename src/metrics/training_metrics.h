// The training loop's series on a task's metrics endpoint (metrics/metrics_endpoint.h): where it
// is, how fast it goes, and how many workers the job has.
#pragma once

#include <cstdint>

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace dtrain {

class MetricsEndpoint;

// Thread-safe, as prometheus-cpp's metrics are: the loop writes, the endpoint's thread reads.
class TrainingMetrics {
 public:
  // REQUIRES: endpoint outlives this.
  explicit TrainingMetrics(MetricsEndpoint& endpoint);

  // After each step: its global and local step, the examples this worker took, its loss, and its
  // time from the batch's fetch to the update's end.
  void step(int64_t global_step, int64_t local_step, int examples, double loss, double seconds);
  // The job's workers (a fixed job: its --workers; an elastic one: its membership now).
  void workers(int count);

 private:
  prometheus::Gauge& global_step_;
  prometheus::Gauge& local_step_;
  prometheus::Counter& examples_;
  prometheus::Gauge& loss_;
  prometheus::Histogram& step_seconds_;
  prometheus::Gauge& workers_;
};

}  // namespace dtrain
