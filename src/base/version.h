// Which dtrain this is: the project's version (CMakeLists.txt) and the git commit its source was
// configured at. Defined in a file the build generates (generated/version_data.cc).
#pragma once

#include <string>
#include <string_view>

namespace dtrain {

// "0.1.0".
std::string_view dtrain_version();
// The commit's abbreviated hash, "a6503ac1f2e4"; empty where the source was not a git checkout,
// or git was not installed, when it was configured.
std::string_view dtrain_commit();

// "dtrain 0.1.0 (commit a6503ac1f2e4)", or "dtrain 0.1.0" without a known commit.
inline std::string version_line() {
  std::string line = "dtrain " + std::string(dtrain_version());
  if (!dtrain_commit().empty()) line += " (commit " + std::string(dtrain_commit()) + ")";
  return line;
}

}  // namespace dtrain
