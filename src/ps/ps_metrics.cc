// The ps task's series, summed over the shards it holds.
#include "ps/ps_metrics.h"

#include "ps/ps_service.h"
#include "ps/task_counters.h"

namespace dtrain {
namespace {

prometheus::MetricFamily family(const std::string& task, const std::string& name,
                                const std::string& help, prometheus::MetricType type,
                                double value) {
  prometheus::ClientMetric metric;
  metric.label = {{"task", task}};
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return {.name = name, .help = help, .type = type, .metric = {metric}};
}

}  // namespace

std::vector<prometheus::MetricFamily> PsMetrics::Collect() const {
  // Before the task has learnt from the chief what it serves: nothing applied yet.
  const ShardStore* store = service_.configured() ? &service_.store() : nullptr;
  const ShardCounters total = store != nullptr ? task_counters(*store) : ShardCounters{};
  const WorkerCount workers = store != nullptr ? store->workers() : WorkerCount{};
  using prometheus::MetricType;
  return {family(task_, "dtrain_global_step", "The step of this task's first shard",
                 MetricType::Gauge, static_cast<double>(total.step)),
          family(task_, "dtrain_ps_updates_applied_total",
                 "Optimizer updates applied to this task's shards (async: pushes; sync: steps)",
                 MetricType::Counter, static_cast<double>(total.applied)),
          family(task_, "dtrain_ps_stale_gradients_total",
                 "Sync gradients dropped for being computed at another step", MetricType::Counter,
                 static_cast<double>(total.stale_dropped)),
          family(task_, "dtrain_ps_duplicate_pushes_total", "Pushes acknowledged without effect",
                 MetricType::Counter, static_cast<double>(total.duplicates)),
          family(task_, "dtrain_ps_nonfinite_gradients_total",
                 "Gradients refused for holding a NaN or an infinity", MetricType::Counter,
                 static_cast<double>(total.rejected)),
          family(task_, "dtrain_ps_connected_workers", "Workers with a connection to this task",
                 MetricType::Gauge, service_.connected_workers()),
          family(task_, "dtrain_workers", "The job's training workers now", MetricType::Gauge,
                 workers.workers > 0 ? workers.workers : workers_)};
}

}  // namespace dtrain
