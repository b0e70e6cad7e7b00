// The files of the live page at / of --metrics_port (metrics/metrics_endpoint.h), embedded into
// the binary at build time by cmake/embed_page_assets.cmake: dtrain's own (src/metrics/page/) and
// uPlot's script, style sheet and licence (npm uplot, which scripts/fetch_uplot.sh fetches).
#pragma once

#include <span>
#include <string_view>

namespace dtrain {

struct PageAsset {
  std::string_view path;          // where it is served: "/", "/uplot.js"
  std::string_view content_type;  // its Content-Type
  std::string_view body;
};

// Every file, each under a path of its own. Defined in the generated source.
std::span<const PageAsset> page_assets();

}  // namespace dtrain
