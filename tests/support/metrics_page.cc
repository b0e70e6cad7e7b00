#include "support/metrics_page.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "support/temp_dir.h"
#include "support/text_match.h"

namespace dtrain::testing {

std::string scrape(const std::string& url) {
  const ProcessResult r = run_command(
      {"python3", "-c",
       "import sys, urllib.request\n"
       "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=30).read().decode())",
       url});
  EXPECT_EQ(r.exit_code, 0) << "GET " << url << ": " << r.err;
  return r.exit_code == 0 ? r.out : std::string();
}

ProcessResult promtool_check(const std::string& page) {
  TempDir dir;
  write_bytes(dir / "page", page);
  return run_command(
      {"sh", "-c", "promtool check metrics < \"$1\"", "sh", (dir / "page").string()});
}

std::vector<std::string> metrics_urls(DtrainProcess& run, size_t count) {
  std::vector<std::string> urls;
  while (urls.size() < count) {
    const std::string line = run.wait_for_line_where([&](const std::string& text) {
      return text.find("metrics at http://") != std::string::npos &&
             std::find_if(urls.begin(), urls.end(), [&](const std::string& url) {
               return text.find(url) != std::string::npos;
             }) == urls.end();
    });
    const std::vector<Match> url = all_matches(line, R"((http://[0-9.]+:[0-9]+/metrics))");
    if (url.size() != 1) break;
    urls.push_back(url[0][1]);
  }
  return urls;
}

uint16_t port_of(const std::string& url) {
  const std::optional<Match> port = first_match(url, R"(^http://[^/]+:([0-9]+)(/|$))");
  return port ? static_cast<uint16_t>(std::stoi(port->at(1))) : 0;
}

std::optional<double> sample(const std::string& page, const std::string& series) {
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    if (line.size() > series.size() && line.starts_with(series) && line[series.size()] == ' ')
      return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

}  // namespace dtrain::testing
