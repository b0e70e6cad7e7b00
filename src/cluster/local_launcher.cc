// Child processes over fork/exec (not posix_spawn: a child must ask for its parent-death signal
// before it execs), one pipe per child for stdout and stderr together, and one poll loop that
// relays output, notices signals through a self-pipe and reaps children.
#include "cluster/local_launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "base/error.h"
#include "cluster/output_relay.h"
#include "comm/handed_listeners.h"

extern char** environ;

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

// Written by the signal handler, read by the poll loop: the only state a handler may touch.
int signal_pipe[2] = {-1, -1};

void on_signal(int signal) {
  const char byte = static_cast<char>(signal);
  [[maybe_unused]] ssize_t ignored = write(signal_pipe[1], &byte, 1);
}

// Installs the SIGINT/SIGTERM/SIGHUP handlers for one launch and puts the old ones back. SIGHUP
// too: a launcher that died of its terminal's hangup would take its children with it (their
// parent-death signal), before any could write its last checkpoint.
class SignalRelay {
 public:
  SignalRelay() {
    if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
      throw IoError(fmt::format("launcher: pipe: {}", std::strerror(errno)));
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
    sigaction(SIGHUP, &action, &old_hup_);
  }
  ~SignalRelay() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGHUP, &old_hup_, nullptr);
    close(signal_pipe[0]);
    close(signal_pipe[1]);
    signal_pipe[0] = signal_pipe[1] = -1;
  }
  SignalRelay(const SignalRelay&) = delete;
  SignalRelay& operator=(const SignalRelay&) = delete;

  int fd() const { return signal_pipe[0]; }
  // The signal received since the last call, or 0.
  int take() {
    char byte = 0;
    int last = 0;
    while (read(signal_pipe[0], &byte, 1) == 1) last = byte;
    return last;
  }

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_hup_ {};
};

struct Child {
  size_t task = 0;  // index into the launch's tasks
  std::string name;
  bool prefix_output = true;
  pid_t pid = -1;
  int out_fd = -1;      // read end of the child's stdout+stderr pipe; -1 after EOF
  std::string partial;  // output after the last newline
  bool running = true;
};

// Whether `entry` ("NAME=value") names a variable that one of `extra` sets. The launcher's own
// variables (the cluster secret it generated) must replace an inherited one, not follow it:
// getenv() finds the first.
bool replaced_by(const std::vector<std::string>& extra, std::string_view entry) {
  const std::string_view name = entry.substr(0, entry.find('='));
  return std::any_of(extra.begin(), extra.end(), [&](const std::string& e) {
    return e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=';
  });
}

// fork + exec of one task. Everything the child needs is built before fork: between fork and exec
// only async-signal-safe calls are allowed, and this process has threads.
Child spawn(const std::vector<LocalTask>& tasks, size_t index, const LaunchOptions& options,
            int listen_fd = -1) {
  const LocalTask& task = tasks[index];
  std::vector<std::string> arg_strings{options.binary.string()};
  arg_strings.insert(arg_strings.end(), task.args.begin(), task.args.end());
  std::vector<char*> argv;
  for (std::string& a : arg_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings = options.extra_env;
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!replaced_by(env_strings, *e)) envp.push_back(*e);
  }
  if (listen_fd >= 0) env_strings.push_back(fmt::format("{}={}", kListenFdVariable, listen_fd));
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    throw IoError(fmt::format("launcher: pipe for {}: {}", task.name, std::strerror(errno)));
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    throw IoError(fmt::format("launcher: fork for {}: {}", task.name, std::strerror(errno)));
  }
  if (pid == 0) {
    // Die with the launcher, even if it is killed with SIGKILL; if it already died, do not run.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    // A task starts with every signal deliverable, whatever this thread blocks (cli/shutdown.h).
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    // This child's listener alone crosses the exec; the other tasks' stay close-on-exec.
    if (listen_fd >= 0) fcntl(listen_fd, F_SETFD, 0);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    execve(argv[0], argv.data(), envp.data());
    const char message[] = "launcher: exec failed\n";
    [[maybe_unused]] ssize_t ignored = write(STDERR_FILENO, message, sizeof message - 1);
    _exit(127);
  }
  close(fds[1]);
  // Non-blocking, so the relay loop never waits on one quiet child while another talks.
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  return Child{index, task.name, task.prefix_output, pid, fds[0], {}, true};
}

// Reads what the child wrote; at EOF flushes a last unterminated line and closes the pipe.
void relay_output(Child& child, OutputRelay& out) {
  char buffer[16384];
  const ssize_t n = read(child.out_fd, buffer, sizeof buffer);
  if (n > 0) {
    out.relay(child.name, child.prefix_output, std::string_view(buffer, static_cast<size_t>(n)),
              child.partial);
    return;
  }
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  out.flush(child.name, child.prefix_output, child.partial);
  close(child.out_fd);
  child.out_fd = -1;
}

std::string describe_exit(const std::string& name, int status) {
  if (WIFSIGNALED(status)) {
    return fmt::format("{} was killed by signal {} ({})", name, WTERMSIG(status),
                       strsignal(WTERMSIG(status)));
  }
  return fmt::format("{} exited with code {}", name, WEXITSTATUS(status));
}

int exit_code_of(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

// Relays whatever an exited child left in its pipe, so that its last lines come before its
// successor's first.
void drain_output(Child& child, OutputRelay& out) {
  while (child.out_fd >= 0) {
    pollfd fd{child.out_fd, POLLIN, 0};
    // Bounded: a grandchild that kept the pipe open must not stall the launcher.
    if (poll(&fd, 1, 1000) <= 0) break;
    relay_output(child, out);
  }
  if (child.out_fd >= 0) {
    close(child.out_fd);
    child.out_fd = -1;
  }
}

bool crashed(int status) { return WIFSIGNALED(status); }

void signal_running(std::vector<Child>& children, int signal) {
  for (Child& child : children)
    if (child.running) kill(child.pid, signal);
}

}  // namespace

LaunchResult run_local_cluster(const std::vector<LocalTask>& tasks, const LaunchOptions& options,
                               std::ostream& stream) {
  OutputRelay out(stream, options.terminal);
  SignalRelay signals;
  std::vector<Child> children;
  LaunchResult result;
  std::optional<Clock::time_point> kill_at;  // set once a stop begins
  auto begin_stop = [&] {
    if (kill_at) return;
    signal_running(children, SIGTERM);
    kill_at = Clock::now() + options.grace;
  };
  // kGroup: waiting for every task to stop before starting them again; SIGKILL for those that
  // have not by then.
  // (A sentinel rather than an optional: GCC 12 takes the optional's payload for uninitialised.)
  constexpr Clock::time_point kNever = Clock::time_point::max();
  Clock::time_point regroup_kill_at = kNever;
  auto respawn = [&](Child& child) {
    drain_output(child, out);
    child = spawn(tasks, child.task, options);
  };
  std::vector<int> listeners;
  for (const LocalTask& task : tasks) listeners.push_back(task.listen_fd);
  auto close_listeners = [&] {
    for (int& fd : listeners) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
  };
  try {
    for (size_t i = 0; i < tasks.size(); ++i) {
      children.push_back(spawn(tasks, i, options, listeners[i]));
    }
    close_listeners();
  } catch (const Error&) {
    close_listeners();
    begin_stop();
    for (Child& child : children) waitpid(child.pid, nullptr, 0);
    throw;
  }

  for (;;) {
    std::vector<pollfd> fds{{signals.fd(), POLLIN, 0}};
    for (const Child& child : children)
      if (child.out_fd >= 0) fds.push_back({child.out_fd, POLLIN, 0});
    const bool any_running =
        std::any_of(children.begin(), children.end(), [](const Child& c) { return c.running; });
    if (!any_running && fds.size() == 1) break;
    // The timeout bounds how late a child's exit or the kill deadline is noticed.
    if (poll(fds.data(), fds.size(), 50) < 0 && errno != EINTR)
      throw IoError(fmt::format("launcher: poll: {}", std::strerror(errno)));

    if (const int signal = signals.take(); signal != 0) {
      result.interrupted = true;
      if (result.exit_code == 0) result.exit_code = 128 + signal;
      begin_stop();
    }
    for (Child& child : children)
      if (child.out_fd >= 0) relay_output(child, out);

    // Every exit first, then the decision: under all-reduce a crash makes the other ranks fail
    // a moment later, and those failures, reaped in the same pass, are its consequence.
    std::vector<std::pair<Child*, int>> exits;
    for (Child& child : children) {
      if (!child.running) continue;
      int status = 0;
      if (waitpid(child.pid, &status, WNOHANG) != child.pid) continue;
      child.running = false;
      exits.emplace_back(&child, status);
    }
    const bool any_crash =
        std::any_of(exits.begin(), exits.end(), [](const auto& e) { return crashed(e.second); });
    for (auto& [child, status] : exits) {
      // Exits the launcher caused by stopping the cluster are not failures of their own.
      if (kill_at || regroup_kill_at != kNever || exit_code_of(status) == 0) continue;
      const bool survivable =
          result.restarts < options.max_restarts &&
          (crashed(status) || (options.restart == RestartPolicy::kGroup && any_crash));
      // An elastic job's worker stopped by a SIGTERM of someone else's leaves the job.
      if (options.restart == RestartPolicy::kElastic && exit_code_of(status) == 128 + SIGTERM) {
        out.line(fmt::format("[launcher] {}: it left the job (SIGTERM)",
                             describe_exit(child->name, status)));
        continue;
      }
      if (!survivable && options.restart == RestartPolicy::kElastic && crashed(status)) {
        out.line(fmt::format("[launcher] {}; the job goes on without it (no restarts left)",
                             describe_exit(child->name, status)));
        continue;
      }
      if (!survivable) {
        result.failed.push_back(describe_exit(child->name, status));
        if (result.exit_code == 0) result.exit_code = exit_code_of(status);
        begin_stop();
        continue;
      }
      if (!crashed(status)) continue;  // a consequence of the crash that restarts the group
      ++result.restarts;
      if (options.restart != RestartPolicy::kGroup) {
        out.line(fmt::format("[launcher] {}; starting it again (restart {} of {})",
                             describe_exit(child->name, status), result.restarts,
                             options.max_restarts));
        respawn(*child);
      } else {
        out.line(fmt::format(
            "[launcher] {}; stopping every task to start the group again (restart {} of {})",
            describe_exit(child->name, status), result.restarts, options.max_restarts));
        regroup_kill_at = Clock::now() + options.grace;
        signal_running(children, SIGTERM);
      }
    }
    const bool all_stopped =
        std::none_of(children.begin(), children.end(), [](const Child& c) { return c.running; });
    if (regroup_kill_at != kNever && all_stopped && !kill_at) {
      regroup_kill_at = kNever;
      for (Child& child : children) respawn(child);
    }
    if (Clock::now() >= std::min(kill_at.value_or(kNever), regroup_kill_at))
      signal_running(children, SIGKILL);
  }
  return result;
}

}  // namespace dtrain
