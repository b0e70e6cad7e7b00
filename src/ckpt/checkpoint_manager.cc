// Checkpoint directory management: save with index and retention, scan, restore newest valid.
#include "ckpt/checkpoint_manager.h"

#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <nlohmann/json.hpp>
#include <system_error>

#include "base/atomic_file.h"
#include "base/error.h"
#include "ckpt/checkpoint_format.h"

namespace dtrain {
namespace cf = ckpt_format;
namespace fs = std::filesystem;

namespace {

// A checkpoint's (or the index's) temporary file whose writer is gone: no process has its pid. A
// live writer's — another process saving into this folder — is its own to finish or remove.
bool is_leftover_temp(std::string_view file_name) {
  std::string_view target;
  long pid = 0;
  if (!parse_atomic_temp_name(file_name, &target, &pid)) return false;
  if (target != cf::kIndexFileName && !CheckpointManager::step_of(target).has_value()) return false;
  return pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH);
}

}  // namespace

CheckpointManager::CheckpointManager(fs::path dir, int keep) : dir_(std::move(dir)), keep_(keep) {}

std::string CheckpointManager::file_name(int64_t step) {
  return fmt::format("{}{}{}", cf::kFilePrefix, step, cf::kFileSuffix);
}

std::optional<int64_t> CheckpointManager::step_of(std::string_view name) {
  if (!name.starts_with(cf::kFilePrefix) || !name.ends_with(cf::kFileSuffix)) return std::nullopt;
  std::string_view digits = name.substr(
      cf::kFilePrefix.size(), name.size() - cf::kFilePrefix.size() - cf::kFileSuffix.size());
  // One spelling per step, so that two files can never claim the same step.
  if (digits.empty() || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  int64_t step = 0;
  auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (err != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return step;
}

std::vector<CheckpointManager::Entry> CheckpointManager::scan() const {
  std::error_code ec;
  if (!fs::exists(dir_, ec)) return {};
  std::vector<Entry> entries;
  fs::directory_iterator it(dir_, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::optional<int64_t> step = step_of(it->path().filename().string());
    std::error_code type_ec;
    if (step && it->is_regular_file(type_ec)) entries.push_back({*step, it->path()});
  }
  if (ec) {
    throw IoError(
        fmt::format("{}: cannot list checkpoint directory: {}", dir_.string(), ec.message()));
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.step < b.step; });
  return entries;
}

std::vector<fs::path> CheckpointManager::list() const {
  std::vector<fs::path> paths;
  for (Entry& e : scan()) paths.push_back(std::move(e.path));
  return paths;
}

fs::path CheckpointManager::save(const CheckpointInfo& info, std::span<const TensorRef> tensors) {
  if (info.global_step < 0) {
    throw CheckpointError(fmt::format("{}: cannot save a checkpoint with negative global_step {}",
                                      dir_.string(), info.global_step));
  }
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) {
    throw IoError(
        fmt::format("{}: cannot create checkpoint directory: {}", dir_.string(), ec.message()));
  }
  fs::path path = dir_ / file_name(info.global_step);
  write_checkpoint(path, info, tensors);

  std::vector<Entry> kept;
  std::vector<Entry> doomed;
  std::vector<Entry> entries = scan();
  size_t first_kept = keep_ > 0 && entries.size() > static_cast<size_t>(keep_)
                          ? entries.size() - static_cast<size_t>(keep_)
                          : 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    // A save older than the newest `keep` (training resumed behind a newer, corrupt file) still
    // survives its own save.
    bool keep = i >= first_kept || entries[i].step == info.global_step;
    (keep ? kept : doomed).push_back(std::move(entries[i]));
  }
  // The index goes first: after a crash between the two steps it lists a subset of the files
  // present, never a file that is gone.
  write_index(kept);
  remove_stale(doomed, path);
  return path;
}

std::vector<fs::path> CheckpointManager::remove_all() const {
  std::vector<fs::path> removed;
  auto remove = [&](const fs::path& victim) {
    std::error_code ec;
    if (!fs::remove(victim, ec) && ec) {
      throw IoError(fmt::format("{}: cannot remove: {}", victim.string(), ec.message()));
    }
  };
  for (const Entry& e : scan()) {
    remove(e.path);
    removed.push_back(e.path);
  }
  remove(dir_ / cf::kIndexFileName);
  return removed;
}

void CheckpointManager::write_index(const std::vector<Entry>& kept) const {
  nlohmann::ordered_json index;
  // kept holds at least the file just saved.
  index[std::string(cf::kIndexLatestKey)] =
      kept.empty() ? std::string() : kept.back().path.filename().string();
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (const Entry& e : kept) all.push_back(e.path.filename().string());
  index[std::string(cf::kIndexAllKey)] = std::move(all);

  AtomicFileWriter file(dir_ / cf::kIndexFileName);
  file.append(index.dump(2));
  file.append("\n");
  file.commit();
}

void CheckpointManager::remove_stale(const std::vector<Entry>& doomed,
                                     const fs::path& saved) const {
  auto remove = [&](const fs::path& victim, std::string_view what) {
    std::error_code ec;
    fs::remove(victim, ec);
    if (ec) {
      throw IoError(fmt::format("{}: cannot remove {}: {} (checkpoint {} was saved)",
                                victim.string(), what, ec.message(), saved.string()));
    }
  };
  for (const Entry& e : doomed) remove(e.path, "old checkpoint");

  // Temporary files of crashed writers (this process writes nothing right now, and its failed
  // writers removed their own).
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    std::error_code type_ec;
    if (is_leftover_temp(it->path().filename().string()) && it->is_regular_file(type_ec)) {
      remove(it->path(), "leftover temporary file");
    }
  }
  if (ec) {
    throw IoError(fmt::format("{}: cannot list checkpoint directory: {} (checkpoint {} was saved)",
                              dir_.string(), ec.message(), saved.string()));
  }
}

CheckpointManager::RestoreResult CheckpointManager::restore_latest() const {
  RestoreResult result;
  std::vector<Entry> entries = scan();
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    try {
      result.checkpoint = read_checkpoint(it->path);
      result.path = it->path;
      return result;
    } catch (const CheckpointError& e) {
      // The message already reads "<file>: <why>".
      result.skipped.push_back(e.what());
    }
  }
  return result;
}

}  // namespace dtrain
