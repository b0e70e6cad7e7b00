// --metrics_port: a task's metrics served in Prometheus's text exposition format at
// http://HOST:PORT/metrics, made by prometheus-cpp (Debian prometheus-cpp-dev) and served by
// metrics/http_server.h, with what a monitoring system expects of any process beside dtrain's own:
// its resident memory and threads; and what its connections moved and refused, by peer. At / it
// serves a live page of the run (metrics/run_board.h, drawn by uPlot, metrics/page_assets.h) and
// at /api/run the page's JSON.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/http_server.h"
#include "metrics/run_board.h"

namespace prometheus {
class Collectable;
class Registry;
}  // namespace prometheus

namespace dtrain {

class MetricsEndpoint {
 public:
  // Listens on host:port (port 0: a free one). `task` labels every series ("worker0", "ps1",
  // "local"). Throws IoError naming --metrics_port and the address when it cannot listen.
  // Thread-safety: everything below may be called while the server's threads serve.
  MetricsEndpoint(const std::string& host, int port, const std::string& task);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  uint16_t port() const { return port_; }
  std::string url() const;  // http://host:port/metrics
  // Where the task's own metrics are registered; what it registers is read at each scrape.
  prometheus::Registry& registry() { return *registry_; }
  // A collector of the task's own, read at each scrape, held until the endpoint goes (which must
  // go before what the collector reads).
  void add(std::shared_ptr<prometheus::Collectable> collector);
  const std::string& task() const { return task_; }
  // What the live page at / shows: fed by the training loop (metrics/training_metrics.h, the
  // chief's run log), read at each GET /api/run.
  RunBoard& board() { return board_; }

 private:
  HttpResponse answer(std::string_view path) const;
  std::string page() const;  // /metrics
  // / and its files, /api/run; 404 for a path that is none of them.
  HttpResponse live_page(std::string_view path) const;

  std::string host_;
  std::string task_;
  std::shared_ptr<prometheus::Registry> registry_;
  RunBoard board_;
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectors_;  // guarded by mutex_
  std::unique_ptr<HttpServer> server_;  // last: its threads read everything above
  uint16_t port_ = 0;
};

}  // namespace dtrain
