#include "support/metrics_page.h"

#include <gtest/gtest.h>

#include <sstream>

#include "support/temp_dir.h"

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

std::optional<double> sample(const std::string& page, const std::string& series) {
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    if (line.size() > series.size() && line.starts_with(series) && line[series.size()] == ' ')
      return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

}  // namespace dtrain::testing
