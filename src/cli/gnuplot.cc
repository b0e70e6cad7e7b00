// gnuplot through posix_spawn: its working folder, standard input and output are set by the
// spawn itself, so no shell ever reads a name, and the script is a file of the private folder.
#include "cli/gnuplot.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "base/error.h"

extern char** environ;

namespace dtrain::cli {
namespace {

// A folder of our own inside out_dir (mkdtemp: a new name, mode 0700), on the same file system, so
// that a finished chart moves into place by rename: a reader sees the old chart or the new one.
class GnuplotFolder {
 public:
  explicit GnuplotFolder(const std::filesystem::path& out_dir) {
    std::string pattern = (out_dir / ".dtrain-plot-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw IoError(fmt::format("{}: cannot make a folder to draw in: {}", out_dir.string(),
                                std::strerror(errno)));
    }
    // Absolute: the spawn changes into it before it opens the log, so a relative name (out_dir
    // as the user gave it) would no longer lead there.
    path_ = std::filesystem::absolute(pattern);
  }
  ~GnuplotFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  GnuplotFolder(const GnuplotFolder&) = delete;
  GnuplotFolder& operator=(const GnuplotFolder&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

class SpawnActions {
 public:
  SpawnActions() { posix_spawn_file_actions_init(&actions_); }
  ~SpawnActions() { posix_spawn_file_actions_destroy(&actions_); }
  SpawnActions(const SpawnActions&) = delete;
  SpawnActions& operator=(const SpawnActions&) = delete;
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

// gnuplot's exit status, waited for; its stdout and stderr went to `log`.
int spawn_and_wait(const std::filesystem::path& gnuplot, const std::filesystem::path& dir,
                   const std::filesystem::path& log) {
  SpawnActions actions;
  if (posix_spawn_file_actions_addchdir_np(actions.get(), dir.c_str()) != 0 ||
      posix_spawn_file_actions_addopen(actions.get(), 0, "/dev/null", O_RDONLY, 0) != 0 ||
      posix_spawn_file_actions_addopen(actions.get(), 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                       0600) != 0 ||
      posix_spawn_file_actions_adddup2(actions.get(), 1, 2) != 0) {
    throw IoError("cannot prepare to run gnuplot");
  }
  // --default-settings: no ~/.gnuplot or system init file changes what the script draws.
  std::string name = "gnuplot", defaults = "--default-settings", script = "charts.gp";
  char* argv[] = {name.data(), defaults.data(), script.data(), nullptr};
  pid_t pid = -1;
  if (const int error = posix_spawn(&pid, gnuplot.c_str(), actions.get(), nullptr, argv, environ);
      error != 0) {
    throw Error(fmt::format("cannot run {} in {}: {}", gnuplot.string(), dir.string(),
                            std::strerror(error)));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw Error(fmt::format("waiting for gnuplot: {}", std::strerror(errno)));
  }
  return status;
}

// The last few lines gnuplot printed, as one line.
std::string what_gnuplot_said(const std::filesystem::path& log) {
  std::ifstream in(log, std::ios::binary);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t^") == std::string::npos) continue;
    lines.push_back(std::move(line));
    if (lines.size() > 4) lines.erase(lines.begin());
  }
  std::string said;
  for (const std::string& line : lines) said += (said.empty() ? "" : " | ") + line;
  return said.empty() ? "it said nothing" : said;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exit code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("killed by {}", strsignal(WTERMSIG(status)));
  return fmt::format("status {}", status);
}

}  // namespace

std::filesystem::path find_gnuplot(std::string_view path) {
  for (size_t start = 0; start <= path.size();) {
    const size_t end = std::min(path.find(':', start), path.size());
    const std::filesystem::path dir(path.substr(start, end - start));
    start = end + 1;
    if (!dir.is_absolute()) continue;
    const std::filesystem::path candidate = dir / "gnuplot";
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  throw Error(
      "gnuplot is not installed (no gnuplot in PATH's folders): dtrain plot draws its charts "
      "with it; install Debian's gnuplot-nox (scripts/setup.sh does)");
}

void run_gnuplot(const std::filesystem::path& gnuplot, std::string_view script,
                 const std::vector<std::string>& outputs, const std::filesystem::path& out_dir) {
  const GnuplotFolder folder(out_dir);
  const std::filesystem::path script_path = folder.path() / "charts.gp";
  {
    std::ofstream out(script_path, std::ios::binary);
    out.write(script.data(), static_cast<std::streamsize>(script.size()));
    if (!out.flush())
      throw IoError(fmt::format("{}: cannot write the chart script", script_path.string()));
  }
  const std::filesystem::path log = folder.path() / "gnuplot.log";
  const int status = spawn_and_wait(gnuplot, folder.path(), log);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw Error(fmt::format("{} failed ({}): {}", gnuplot.string(), describe_status(status),
                            what_gnuplot_said(log)));
  }
  for (const std::string& name : outputs) {
    const std::filesystem::path drawn = folder.path() / name;
    if (!std::filesystem::is_regular_file(drawn)) {
      throw Error(fmt::format("{} wrote no {} ({} has its pngcairo and svg terminals): {}",
                              gnuplot.string(), name, "Debian's gnuplot-nox",
                              what_gnuplot_said(log)));
    }
    if (std::rename(drawn.c_str(), (out_dir / name).c_str()) != 0) {
      throw IoError(
          fmt::format("{}: cannot write: {}", (out_dir / name).string(), std::strerror(errno)));
    }
  }
}

}  // namespace dtrain::cli
