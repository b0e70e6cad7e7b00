// The training loop's series, registered once per task.
#include "metrics/training_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <string>

#include "metrics/metrics_endpoint.h"

namespace dtrain {
namespace {

prometheus::Labels task_labels(const MetricsEndpoint& endpoint) {
  return {{"task", endpoint.task()}};
}

prometheus::Gauge& gauge(MetricsEndpoint& endpoint, const std::string& name,
                         const std::string& help) {
  return prometheus::BuildGauge()
      .Name(name)
      .Help(help)
      .Register(endpoint.registry())
      .Add(task_labels(endpoint));
}

// A step from a millisecond (a small model on one core) to tens of seconds (a straggler).
const prometheus::Histogram::BucketBoundaries kStepBuckets = {
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30};

}  // namespace

TrainingMetrics::TrainingMetrics(MetricsEndpoint& endpoint)
    : global_step_(gauge(endpoint, "dtrain_global_step",
                         "The job's global step, as this task "
                         "last saw it")),
      local_step_(gauge(endpoint, "dtrain_local_step", "Steps this task has trained")),
      examples_(prometheus::BuildCounter()
                    .Name("dtrain_examples_total")
                    .Help("Training examples this task has computed gradients on")
                    .Register(endpoint.registry())
                    .Add(task_labels(endpoint))),
      loss_(gauge(endpoint, "dtrain_loss", "The training loss of this task's last batch")),
      step_seconds_(prometheus::BuildHistogram()
                        .Name("dtrain_step_seconds")
                        .Help("Time of this task's steps, by phase (step: the whole step)")
                        .Register(endpoint.registry())
                        .Add({{"task", endpoint.task()}, {"phase", "step"}}, kStepBuckets)),
      workers_(gauge(endpoint, "dtrain_workers", "The job's training workers now")) {}

void TrainingMetrics::step(int64_t global_step, int64_t local_step, int examples, double loss,
                           double seconds) {
  global_step_.Set(static_cast<double>(global_step));
  local_step_.Set(static_cast<double>(local_step));
  examples_.Increment(examples);
  loss_.Set(loss);
  step_seconds_.Observe(seconds);
}

void TrainingMetrics::workers(int count) { workers_.Set(count); }

}  // namespace dtrain
