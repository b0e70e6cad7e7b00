// Runs the real dtrain binary as a child process for integration tests, capturing its output. The
// child is always waited for (reaped) before run_dtrain returns, whatever happens.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace dtrain::testing {

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;      // the signal that ended it, if any
  std::string out;     // stdout
  std::string err;     // stderr
};

// Runs DTRAIN_BINARY with args; extra_env entries ("NAME=value") are added to the environment.
ProcessResult run_dtrain(const std::vector<std::string>& args,
                         const std::vector<std::string>& extra_env = {});

// The MNIST folder the test command fetched: $DTRAIN_DATA_DIR or ~/.cache/dtrain/mnist.
std::filesystem::path mnist_dir();

// Lines of text that contain needle.
int count_lines_containing(const std::string& text, const std::string& needle);

}  // namespace dtrain::testing
