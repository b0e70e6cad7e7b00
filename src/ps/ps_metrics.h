// A ps task's series on its metrics endpoint (metrics/metrics_endpoint.h), read from its store and
// roster at each scrape: the step, what the pushes came to, and the workers.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <string>
#include <vector>

namespace dtrain {

class PsService;

class PsMetrics final : public prometheus::Collectable {
 public:
  // `workers`: the job's, until the task counts them (an elastic job, one that takes joiners).
  // REQUIRES: service outlives every scrape.
  PsMetrics(PsService& service, std::string task, int workers)
      : service_(service), task_(std::move(task)), workers_(workers) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  PsService& service_;
  std::string task_;
  int workers_;
};

}  // namespace dtrain
