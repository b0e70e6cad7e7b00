// The handler only stores the signal and writes one byte to a pipe, the two things a handler may
// do; the watcher thread reads the pipe, says what happens next, and enforces the timeout.
#include "cli/shutdown.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>

#include "base/error.h"

namespace dtrain::cli {
namespace {

constexpr std::array kSignals = {SIGTERM, SIGHUP, SIGINT};
constexpr char kQuit = 0;  // from the destructor: the watcher ends

// Process-wide by nature: a signal handler has no other way to reach the instance.
std::atomic<StopRequest*> active_request{nullptr};
int wake_pipe[2] = {-1, -1};
struct sigaction previous[kSignals.size()];

void on_signal(int signal) {
  if (StopRequest* request = active_request.load(); request != nullptr) {
    // The first signal names the stop; a later one only hurries it.
    if (!request->requested()) request->request(signal);
  }
  const char byte = static_cast<char>(signal);
  const int saved = errno;
  [[maybe_unused]] const ssize_t ignored = write(wake_pipe[1], &byte, 1);
  errno = saved;
}

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (const int signal : kSignals) sigaddset(&set, signal);
  return set;
}

// Lines from a thread while others print: one write each, straight to stderr.
void say(const std::string& line) {
  const std::string text = line + "\n";
  [[maybe_unused]] const ssize_t ignored = write(STDERR_FILENO, text.data(), text.size());
}

}  // namespace

GracefulShutdown::GracefulShutdown(std::chrono::milliseconds timeout, std::string who)
    : timeout_(timeout), who_(std::move(who)) {
  if (pipe2(wake_pipe, O_CLOEXEC) != 0) {
    throw IoError(fmt::format("cannot watch for signals: pipe: {}", std::strerror(errno)));
  }
  active_request.store(&request_);
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &action, &previous[i]);
  const sigset_t signals = stop_signals();
  pthread_sigmask(SIG_BLOCK, &signals, &blocked_before_);
  watcher_ = std::jthread([this, signals] {
    pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
    watch();
  });
}

GracefulShutdown::~GracefulShutdown() {
  // Unwinding from a failure: the process is about to say why and exit 1. A stop signal now is
  // most likely a launcher stopping the job because another task failed first (a ps that aborted
  // the job is one); acted on, it would end this task before its error line is written. Ignored
  // instead: the exit is moments away, and a launcher's SIGKILL still ends a task that hangs.
  const bool failing = std::uncaught_exceptions() > 0;
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  for (size_t i = 0; i < kSignals.size(); ++i)
    sigaction(kSignals[i], failing ? &ignore : &previous[i], nullptr);
  active_request.store(nullptr);
  const char quit = kQuit;
  [[maybe_unused]] const ssize_t ignored = write(wake_pipe[1], &quit, 1);
  watcher_.join();
  // A signal that came after the watcher left is pending here, and is taken by the disposition
  // just restored.
  pthread_sigmask(SIG_SETMASK, &blocked_before_, nullptr);
  close(wake_pipe[0]);
  close(wake_pipe[1]);
  wake_pipe[0] = wake_pipe[1] = -1;
}

void GracefulShutdown::watch() {
  char byte = 0;
  for (;;) {
    const ssize_t n = read(wake_pipe[0], &byte, 1);
    if (n == 1) break;
    if (n < 0 && errno == EINTR) continue;
    return;
  }
  if (byte == kQuit) return;
  const int signal = request_.signal();
  const int status = 128 + signal;
  say(fmt::format(
      "{}: received {}: stopping at the next step boundary (the chief writes a checkpoint first); "
      "exiting within {} s (--shutdown_timeout)",
      who_, signal_name(signal), timeout_.count() / 1000.0));
  pollfd fd{wake_pipe[0], POLLIN, 0};
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      say(fmt::format("{}: did not stop within {} s (--shutdown_timeout); exiting now with {}",
                      who_, timeout_.count() / 1000.0, status));
      _exit(status);
    }
    const int ready = poll(&fd, 1, static_cast<int>(left.count()));
    if (ready <= 0) continue;
    if (read(wake_pipe[0], &byte, 1) != 1) continue;
    if (byte == kQuit) return;
    say(fmt::format("{}: a second signal: exiting now with {}", who_, status));
    _exit(status);
  }
}

}  // namespace dtrain::cli
