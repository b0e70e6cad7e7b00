// The default MNIST folder: the one place that reads DTRAIN_DATA_DIR and HOME.
#include <cstdlib>
#include <string>

#include "cli/commands.h"

namespace dtrain::cli {

std::string default_data_dir() {
  if (const char* dir = std::getenv("DTRAIN_DATA_DIR"); dir != nullptr && *dir != '\0') return dir;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/dtrain/mnist";
}

}  // namespace dtrain::cli
