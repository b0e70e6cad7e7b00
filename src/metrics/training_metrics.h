// The training loop's series on a task's metrics endpoint (metrics/metrics_endpoint.h): where it
// is, how fast it goes, and how many workers the job has.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

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
  // time from the batch's fetch to the update's end (also the live page's, metrics/run_board.h).
  void step(int64_t global_step, int64_t local_step, int examples, double loss, double seconds);
  // The step's phases (negative: not one of this strategy's): compute, communicate, apply.
  void phases(double compute, double communicate, double apply);
  // One all-reduce of gradient bucket `bucket` (`bytes` long) took `seconds`.
  void collective(int bucket, size_t bytes, double seconds);
  // The job's workers (a fixed job: its --workers; an elastic one: its membership now).
  void workers(int count);

 private:
  prometheus::Gauge& global_step_;
  prometheus::Gauge& local_step_;
  prometheus::Counter& examples_;
  prometheus::Gauge& loss_;
  prometheus::Histogram& step_seconds_;
  MetricsEndpoint& endpoint_;
  // compute, communicate, apply: made at their first time, so that a page shows only the phases
  // its strategy has.
  prometheus::Histogram* phase_seconds_[3] = {};
  std::vector<prometheus::Histogram*> bucket_seconds_;  // by bucket, made at its first all-reduce
  prometheus::Gauge& workers_;
};

}  // namespace dtrain
