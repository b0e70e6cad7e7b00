// LoopMetrics: the endpoint, named after the task, and the strategy's observers wired to it.
#include "train/loop_metrics.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

namespace dtrain {
namespace {

std::string task_name(const WorkerPlace& place) {
  return place.distributed ? fmt::format("worker{}", place.name_index()) : "local";
}

}  // namespace

LoopMetrics::LoopMetrics(const TrainConfig& config, const WorkerPlace& place, Strategy& strategy,
                         std::ostream& out, const std::string& prefix)
    : endpoint_(config.metrics_host, config.metrics_port, task_name(place)), training_(endpoint_) {
  training_.workers(place.workers);
  strategy.observe(
      {.collective = [this](int bucket, size_t bytes,
                            double seconds) { training_.collective(bucket, bytes, seconds); },
       .workers = [this](const WorkerTimes& times) { endpoint_.board().workers(times); }});
  fmt::print(out, "{}metrics at {}\n", prefix, endpoint_.url());
  out << std::flush;
}

}  // namespace dtrain
