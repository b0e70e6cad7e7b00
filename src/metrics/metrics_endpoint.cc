// The endpoint, and the process's own figures read from /proc at each scrape.
#include "metrics/metrics_endpoint.h"

#include <fmt/format.h>
#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "comm/transport_counters.h"
#include "metrics/page_assets.h"

namespace dtrain {

// dtrain_process_resident_memory_bytes and dtrain_process_threads, from /proc/self/status when
// scraped (VmRSS, Threads).
class ProcessCollector final : public prometheus::Collectable {
 public:
  explicit ProcessCollector(std::string task) : task_(std::move(task)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    double resident = 0, threads = 0;
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
      if (line.starts_with("VmRSS:")) resident = std::stod(line.substr(6)) * 1024;  // kB
      if (line.starts_with("Threads:")) threads = std::stod(line.substr(8));
    }
    return {gauge("dtrain_process_resident_memory_bytes", "Resident memory of the task's process",
                  resident),
            gauge("dtrain_process_threads", "Threads of the task's process", threads)};
  }

 private:
  prometheus::MetricFamily gauge(const std::string& name, const std::string& help,
                                 double value) const {
    prometheus::ClientMetric metric;
    metric.label = {{"task", task_}};
    metric.gauge.value = value;
    return {.name = name, .help = help, .type = prometheus::MetricType::Gauge, .metric = {metric}};
  }

  std::string task_;
};

// The process's connections (comm/transport_counters.h), read at each scrape: bytes by peer, and
// the frames and handshakes refused, by peer and reason.
class TransportCollector final : public prometheus::Collectable {
 public:
  explicit TransportCollector(std::string task) : task_(std::move(task)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    const TransportCounters& counters = TransportCounters::process();
    prometheus::MetricFamily sent = family(
        "dtrain_bytes_sent_total", "Bytes this task's connections sent, frames whole, by peer");
    prometheus::MetricFamily received =
        family("dtrain_bytes_received_total",
               "Bytes this task's connections received, frames whole, by peer");
    for (const TransportCounters::Traffic& traffic : counters.traffic()) {
      sent.metric.push_back(counter({{"peer", traffic.peer}}, traffic.sent));
      received.metric.push_back(counter({{"peer", traffic.peer}}, traffic.received));
    }
    prometheus::MetricFamily rejected =
        family("dtrain_frames_rejected_total",
               "Frames and handshakes this task refused, by peer (a peer that proved nothing: its "
               "address) and reason");
    for (const TransportCounters::Rejections& r : counters.rejections()) {
      rejected.metric.push_back(counter({{"peer", r.peer}, {"reason", r.reason}}, r.frames));
    }
    std::vector<prometheus::MetricFamily> families;
    for (prometheus::MetricFamily* f : {&sent, &received, &rejected}) {
      if (!f->metric.empty()) families.push_back(std::move(*f));
    }
    return families;
  }

 private:
  static prometheus::MetricFamily family(const std::string& name, const std::string& help) {
    return {.name = name, .help = help, .type = prometheus::MetricType::Counter, .metric = {}};
  }
  prometheus::ClientMetric counter(std::vector<prometheus::ClientMetric::Label> labels,
                                   uint64_t value) const {
    prometheus::ClientMetric metric;
    metric.label = {{"task", task_}};
    metric.label.insert(metric.label.end(), labels.begin(), labels.end());
    metric.counter.value = static_cast<double>(value);
    return metric;
  }

  std::string task_;
};

MetricsEndpoint::MetricsEndpoint(const std::string& host, int port, const std::string& task)
    : host_(host), task_(task), registry_(std::make_shared<prometheus::Registry>()), board_(task) {
  collectors_ = {registry_, std::make_shared<ProcessCollector>(task),
                 std::make_shared<TransportCollector>(task)};
  try {
    server_ = std::make_unique<HttpServer>(HttpServerOptions{.host = host, .port = port},
                                           [this](std::string_view path) { return answer(path); });
  } catch (const IoError& error) {
    throw IoError(
        fmt::format("--metrics_port {}: cannot serve the metrics on {}", port, error.what()));
  }
  port_ = server_->port();
}

MetricsEndpoint::~MetricsEndpoint() = default;

void MetricsEndpoint::add(std::shared_ptr<prometheus::Collectable> collector) {
  std::lock_guard lock(mutex_);
  collectors_.push_back(std::move(collector));
}

std::string MetricsEndpoint::url() const {
  return fmt::format("http://{}:{}/metrics", host_, port_);
}

HttpResponse MetricsEndpoint::answer(std::string_view path) const {
  if (path == "/metrics") {
    return {.content_type = "text/plain; version=0.0.4; charset=utf-8", .body = page()};
  }
  return live_page(path);
}

HttpResponse MetricsEndpoint::live_page(std::string_view path) const {
  if (path == "/api/run") return {.content_type = "application/json", .body = board_.json()};
  for (const PageAsset& asset : page_assets()) {
    if (asset.path == path)
      return {.content_type = std::string(asset.content_type), .body = std::string(asset.body)};
  }
  return {.status = 404,
          .body = "not found: this task serves /metrics, its live page at / and /api/run\n"};
}

// Read at each scrape, outside the lock: a collector takes its own locks.
std::string MetricsEndpoint::page() const {
  std::vector<std::shared_ptr<prometheus::Collectable>> collectors;
  {
    std::lock_guard lock(mutex_);
    collectors = collectors_;
  }
  std::vector<prometheus::MetricFamily> families;
  for (const auto& collector : collectors) {
    for (prometheus::MetricFamily& family : collector->Collect())
      families.push_back(std::move(family));
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace dtrain
