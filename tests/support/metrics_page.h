// A task's metrics endpoint (--metrics_port) as tests read it: the page fetched by Python's
// urllib, Prometheus's own promtool's verdict on it, and the value of one series — none of it
// dtrain's code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "support/process.h"

namespace dtrain::testing {

// The body of GET url; a failed fetch fails the test and returns "".
std::string scrape(const std::string& url);
// `promtool check metrics` on the page (Debian's prometheus package).
ProcessResult promtool_check(const std::string& page);
// The URLs a run printed ("... metrics at http://127.0.0.1:P/metrics"), in the order the tasks
// printed them, once `count` have come (fewer if its output ends first).
std::vector<std::string> metrics_urls(DtrainProcess& run, size_t count);
// The port of such a URL; 0 if it has none.
uint16_t port_of(const std::string& url);
// The value of the sample whose name and labels are `series` exactly, as the page writes them
// (`dtrain_global_step{task="local"}`); nullopt when the page has none.
std::optional<double> sample(const std::string& page, const std::string& series);

}  // namespace dtrain::testing
