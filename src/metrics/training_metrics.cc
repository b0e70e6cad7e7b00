// The training loop's series, registered once per task.
#include "metrics/training_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <iterator>
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

// A step from a millisecond (a small model on one core) to tens of seconds (a straggler); its
// phases and a bucket's all-reduce from 50 microseconds.
const prometheus::Histogram::BucketBoundaries kStepBuckets = {
    0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
    0.05,    0.1,    0.2,    0.5,    1,     2,     5,     10,   30};

prometheus::Family<prometheus::Histogram>& step_family(MetricsEndpoint& endpoint) {
  return prometheus::BuildHistogram()
      .Name("dtrain_step_seconds")
      .Help(
          "Time of this task's steps, by phase (step: the whole step; compute: the gradients; "
          "communicate: all-reduce, or push and pull; apply: the optimizer's update here)")
      .Register(endpoint.registry());
}

prometheus::Histogram& phase(prometheus::Family<prometheus::Histogram>& family,
                             const MetricsEndpoint& endpoint, const std::string& name) {
  return family.Add({{"task", endpoint.task()}, {"phase", name}}, kStepBuckets);
}

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
      step_seconds_(phase(step_family(endpoint), endpoint, "step")),
      endpoint_(endpoint),
      workers_(gauge(endpoint, "dtrain_workers", "The job's training workers now")) {}

void TrainingMetrics::step(int64_t global_step, int64_t local_step, int examples, double loss,
                           double seconds) {
  global_step_.Set(static_cast<double>(global_step));
  local_step_.Set(static_cast<double>(local_step));
  examples_.Increment(examples);
  loss_.Set(loss);
  step_seconds_.Observe(seconds);
  endpoint_.board().own_step(global_step, seconds);
}

void TrainingMetrics::phases(double compute, double communicate, double apply) {
  static constexpr const char* kNames[] = {"compute", "communicate", "apply"};
  const double times[] = {compute, communicate, apply};
  for (size_t i = 0; i < std::size(times); ++i) {
    if (times[i] < 0) continue;
    if (phase_seconds_[i] == nullptr)
      phase_seconds_[i] = &phase(step_family(endpoint_), endpoint_, kNames[i]);
    phase_seconds_[i]->Observe(times[i]);
  }
}

void TrainingMetrics::collective(int bucket, size_t bytes, double seconds) {
  if (bucket < 0) return;
  const auto index = static_cast<size_t>(bucket);
  if (index >= bucket_seconds_.size()) bucket_seconds_.resize(index + 1, nullptr);
  if (bucket_seconds_[index] == nullptr) {
    bucket_seconds_[index] =
        &prometheus::BuildHistogram()
             .Name("dtrain_allreduce_seconds")
             .Help(
                 "Time of each all-reduce of a gradient bucket, by the "
                 "bucket's bytes")
             .Register(endpoint_.registry())
             .Add({{"task", endpoint_.task()}, {"bucket_bytes", std::to_string(bytes)}},
                  kStepBuckets);
  }
  bucket_seconds_[index]->Observe(seconds);
}

void TrainingMetrics::workers(int count) { workers_.Set(count); }

}  // namespace dtrain
