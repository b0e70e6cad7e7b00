// A task's metrics endpoint (--metrics_port) as tests read it: the page fetched by Python's
// urllib, Prometheus's own promtool's verdict on it, and the value of one series — none of it
// dtrain's code.
#pragma once

#include <optional>
#include <string>

#include "support/process.h"

namespace dtrain::testing {

// The body of GET url; a failed fetch fails the test and returns "".
std::string scrape(const std::string& url);
// `promtool check metrics` on the page (Debian's prometheus package).
ProcessResult promtool_check(const std::string& page);
// The value of the sample whose name and labels are `series` exactly, as the page writes them
// (`dtrain_global_step{task="local"}`); nullopt when the page has none.
std::optional<double> sample(const std::string& page, const std::string& series);

}  // namespace dtrain::testing
