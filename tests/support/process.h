// Runs the real dtrain binary as a child process for integration tests, capturing its output. The
// child is always waited for (reaped): by run_dtrain before it returns, whatever happens; by
// DtrainProcess's wait() or, failing that, its destructor.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dtrain::testing {

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;      // the signal that ended it, if any
  std::string out;     // stdout
  std::string err;     // stderr
};

// Runs DTRAIN_BINARY with args; extra_env entries ("NAME=value") are added to the environment,
// replacing a variable of the same name.
ProcessResult run_dtrain(const std::vector<std::string>& args,
                         const std::vector<std::string>& extra_env = {});

// Runs argv[0], looked up on PATH, with the rest of argv as its arguments, as run_dtrain does.
ProcessResult run_command(const std::vector<std::string>& argv,
                          const std::vector<std::string>& extra_env = {});

// One dtrain child that runs while the test goes on (several tasks of a cluster at once, or one
// the test signals). Started by the constructor; its stdout and stderr are drained on a thread of
// its own, so a chatty child never blocks on a full pipe. wait() reaps it; a child not yet reaped
// when the object is destroyed (an assertion failed first) is killed with SIGKILL — its whole
// process group if it has its own — and reaped there.
// Thread-safety: one test thread drives it; the thread that drains the pipes is its own business.
class DtrainProcess {
 public:
  struct Options {
    std::vector<std::string> extra_env;  // "NAME=value" entries, as for run_dtrain
    // Its own process group (setpgid(0, 0)): a signal to the test's group (a terminal's Ctrl-C)
    // does not reach it, and a killed child's own children die with it.
    bool own_process_group = false;
    // A command that runs the binary in another setting and then becomes it (exec, not fork),
    // so that pid() is still dtrain's: `ip netns exec NAME` puts it on a host of its own.
    std::vector<std::string> prefix;
    // Runs this program (looked up on PATH) in place of DTRAIN_BINARY: a daemon the test needs,
    // which then gets the same draining, waiting and reaping.
    std::string program;
  };
  // Bounds each wait below: far beyond what a loaded machine needs, well short of a hung run.
  static constexpr std::chrono::seconds kPatience{120};

  // Starts DTRAIN_BINARY with args. Throws std::runtime_error if it cannot.
  explicit DtrainProcess(const std::vector<std::string>& args, const Options& options);
  explicit DtrainProcess(const std::vector<std::string>& args) : DtrainProcess(args, Options{}) {}
  ~DtrainProcess();
  DtrainProcess(const DtrainProcess&) = delete;
  DtrainProcess& operator=(const DtrainProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Blocks until a whole line of stdout contains needle, and returns that line; returns "" if
  // stdout ends first or patience runs out.
  std::string wait_for_line(const std::string& needle,
                            std::chrono::milliseconds patience = kPatience);
  // The same for the first whole line that `matches`.
  std::string wait_for_line_where(const std::function<bool(const std::string&)>& matches,
                                  std::chrono::milliseconds patience = kPatience);
  // The last whole line of stdout so far that contains needle, or "" if none; does not wait. For
  // following a child's progress while it runs.
  std::string last_line_containing(const std::string& needle) const;
  // Sends `signal` to the process alone (not its group). REQUIRES: not yet reaped.
  void send_signal(int signal) const;
  // Waits for the process to exit, reaps it, and returns its status and all its output. A child
  // still running after `patience` is killed with SIGKILL first (then result.signal == SIGKILL),
  // so a hang fails the test instead of stalling it. REQUIRES: called once.
  ProcessResult wait(std::chrono::milliseconds patience = kPatience);

 private:
  void drain(int out_fd, int err_fd);
  void kill_and_reap();

  pid_t pid_ = -1;
  int pidfd_ = -1;  // becomes readable when the child exits
  bool own_group_ = false;
  bool reaped_ = false;

  mutable std::mutex mutex_;
  std::condition_variable output_changed_;
  std::string out_;            // guarded by mutex_
  std::string err_;            // guarded by mutex_
  bool output_ended_ = false;  // guarded by mutex_: both pipes reached end of file
  std::jthread drainer_;       // last: it uses everything above
};

// The MNIST folder the test command fetched: $DTRAIN_DATA_DIR or ~/.cache/dtrain/mnist.
std::filesystem::path mnist_dir();

// Lines of text that contain needle.
int count_lines_containing(const std::string& text, const std::string& needle);

}  // namespace dtrain::testing
