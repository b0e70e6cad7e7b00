// Child processes over pipes. stdout and stderr are drained with poll() so a chatty child never
// blocks on a full pipe (by the caller in run_dtrain, by a thread of its own in DtrainProcess);
// waitpid() reaps it, after a pidfd has said it exited when a wait must be bounded.
#include "support/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string_view>

extern char** environ;

namespace dtrain::testing {
namespace {

// Reads both pipes until both reach end of file, handing each chunk to sink (0: stdout, 1:
// stderr), and closes them.
void drain_pipes(int out_fd, int err_fd, const std::function<void(int, std::string_view)>& sink) {
  std::array<pollfd, 2> fds{{{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}}};
  int open = 2;
  char buffer[65536];
  while (open > 0) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("poll failed");
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        sink(i, std::string_view(buffer, static_cast<size_t>(n)));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
}

struct Spawned {
  pid_t pid = -1;
  int out_fd = -1;  // read ends of the child's stdout and stderr
  int err_fd = -1;
};

// Starts argv[0] (found on PATH, as a shell would) with the rest as its arguments, its stdout and
// stderr on fresh pipes. SIGINT and SIGTERM are reset to their defaults and no signal is blocked
// in the child, whatever the test process does.
Spawned spawn(std::vector<std::string> argv_strings, const std::vector<std::string>& extra_env,
              bool own_process_group) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw std::runtime_error("pipe failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults, none;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &none);
  short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
  if (own_process_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attr, 0);
  }
  posix_spawnattr_setflags(&attr, flags);

  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  // extra_env replaces a variable of the same name (getenv would find the first).
  auto overridden = [&](std::string_view entry) {
    const std::string_view name = entry.substr(0, entry.find('='));
    for (const std::string& e : extra_env)
      if (e.substr(0, e.find('=')) == name) return true;
    return false;
  };
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e)
    if (!overridden(*e)) env_strings.emplace_back(*e);
  env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    throw std::runtime_error(argv_strings[0] + ": posix_spawn failed: " + std::strerror(rc));
  }
  return {pid, out_pipe[0], err_pipe[0]};
}

// `prefix` (a command that runs another, such as `ip netns exec NAME`), DTRAIN_BINARY (or
// `program`), then args.
std::vector<std::string> dtrain_argv(const std::vector<std::string>& prefix,
                                     const std::vector<std::string>& args,
                                     const std::string& program = "") {
  std::vector<std::string> argv = prefix;
  argv.push_back(program.empty() ? std::string(DTRAIN_BINARY) : program);
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

void reap(pid_t pid, ProcessResult& result) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
}

}  // namespace

ProcessResult run_dtrain(const std::vector<std::string>& args,
                         const std::vector<std::string>& extra_env) {
  return run_command(dtrain_argv({}, args), extra_env);
}

ProcessResult run_command(const std::vector<std::string>& argv,
                          const std::vector<std::string>& extra_env) {
  const Spawned child = spawn(argv, extra_env, /*own_process_group=*/false);
  ProcessResult result;
  try {
    drain_pipes(child.out_fd, child.err_fd, [&](int stream, std::string_view data) {
      (stream == 0 ? result.out : result.err) += data;
    });
  } catch (...) {
    ::kill(child.pid, SIGKILL);
    ::waitpid(child.pid, nullptr, 0);
    throw;
  }
  reap(child.pid, result);
  return result;
}

DtrainProcess::DtrainProcess(const std::vector<std::string>& args, const Options& options)
    : own_group_(options.own_process_group) {
  const Spawned child =
      spawn(dtrain_argv(options.prefix, args, options.program), options.extra_env, own_group_);
  pid_ = child.pid;
  // The raw system call: glibc 2.36's <sys/pidfd.h> lacks extern "C" for C++.
  pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  if (pidfd_ < 0) {
    const std::string reason = std::strerror(errno);
    ::close(child.out_fd);
    ::close(child.err_fd);
    kill_and_reap();
    throw std::runtime_error("pidfd_open failed: " + reason);
  }
  drainer_ = std::jthread([this, child] { drain(child.out_fd, child.err_fd); });
}

DtrainProcess::~DtrainProcess() {
  if (!reaped_) kill_and_reap();
  if (drainer_.joinable()) drainer_.join();  // the pipes end once the child has gone
  if (pidfd_ >= 0) ::close(pidfd_);
}

void DtrainProcess::drain(int out_fd, int err_fd) {
  try {
    drain_pipes(out_fd, err_fd, [&](int stream, std::string_view data) {
      {
        std::lock_guard lock(mutex_);
        (stream == 0 ? out_ : err_) += data;
      }
      output_changed_.notify_all();
    });
  } catch (const std::exception&) {
    // poll itself failed: nothing more can be read; what was read is kept.
  }
  {
    std::lock_guard lock(mutex_);
    output_ended_ = true;
  }
  output_changed_.notify_all();
}

std::string DtrainProcess::wait_for_line(const std::string& needle,
                                         std::chrono::milliseconds patience) {
  return wait_for_line_where(
      [&](const std::string& line) { return line.find(needle) != std::string::npos; }, patience);
}

std::string DtrainProcess::wait_for_line_where(
    const std::function<bool(const std::string&)>& matches, std::chrono::milliseconds patience) {
  std::string found;
  auto line_matches = [&] {
    // Only whole lines: the text up to the last newline.
    std::istringstream in(out_.substr(0, out_.rfind('\n') + 1));
    for (std::string line; std::getline(in, line);) {
      if (matches(line)) {
        found = line;
        return true;
      }
    }
    return output_ended_;
  };
  std::unique_lock lock(mutex_);
  output_changed_.wait_for(lock, patience, line_matches);
  return found;
}

std::string DtrainProcess::last_line_containing(const std::string& needle) const {
  std::lock_guard lock(mutex_);
  // Only whole lines: a match must lie before the last newline (needle holds none).
  const size_t last_newline = out_.rfind('\n');
  if (last_newline == std::string::npos) return "";
  const size_t at = out_.rfind(needle, last_newline);
  if (at == std::string::npos) return "";
  const size_t begin = at == 0 ? 0 : out_.rfind('\n', at - 1) + 1;  // npos + 1 == 0
  return out_.substr(begin, out_.find('\n', at) - begin);
}

void DtrainProcess::send_signal(int signal) const {
  if (reaped_) throw std::logic_error("DtrainProcess::send_signal after wait()");
  ::kill(pid_, signal);
}

ProcessResult DtrainProcess::wait(std::chrono::milliseconds patience) {
  if (reaped_) throw std::logic_error("DtrainProcess::wait called twice");
  pollfd exited{pidfd_, POLLIN, 0};
  const auto give_up = std::chrono::steady_clock::now() + patience;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        give_up - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    const int ready = ::poll(&exited, 1, static_cast<int>(left.count()));
    if (ready > 0 || (ready < 0 && errno != EINTR)) break;
  }
  ProcessResult result;
  if (exited.revents == 0) {
    // Still running after all that patience: a hang. Kill it, so the test fails rather than stalls.
    ::kill(own_group_ ? -pid_ : pid_, SIGKILL);
  }
  reap(pid_, result);
  reaped_ = true;
  drainer_.join();
  std::lock_guard lock(mutex_);
  result.out = out_;
  result.err = err_;
  return result;
}

void DtrainProcess::kill_and_reap() {
  ::kill(own_group_ ? -pid_ : pid_, SIGKILL);
  ProcessResult ignored;
  reap(pid_, ignored);
  reaped_ = true;
}

std::filesystem::path mnist_dir() {
  if (const char* dir = std::getenv("DTRAIN_DATA_DIR"); dir != nullptr && *dir != '\0') return dir;
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home != nullptr ? home : ".") / ".cache/dtrain/mnist";
}

int count_lines_containing(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  int count = 0;
  for (std::string line; std::getline(in, line);) count += line.find(needle) != std::string::npos;
  return count;
}

}  // namespace dtrain::testing
