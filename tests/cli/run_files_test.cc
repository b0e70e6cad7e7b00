// The files a training run writes into folders the user names (metrics.jsonl, TensorBoard event
// files, checkpoints), on the real binary: a link someone planted at one of their names is refused
// with the name, never written through, and what the run creates only its owner may read.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/temp_dir.h"

namespace dtrain::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr std::string_view kVictimText = "a file of the user's that no run should touch\n";

std::vector<std::string> train_flags(const std::vector<std::string>& more) {
  return concat(concat({"train"}, softmax_flags()), concat({"--train_steps", "20"}, more));
}

fs::path make_victim(const TempDir& dir) {
  const fs::path victim = dir / "victim";
  std::ofstream(victim) << kVictimText;
  return victim;
}

unsigned permission_bits(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

TEST(RunFiles, ALinkPlantedAtMetricsJsonlIsRefusedByNameAndItsTargetIsUntouched) {
  const TempDir dir;
  const fs::path victim = make_victim(dir);
  const fs::path run = dir / "run";
  fs::create_directory(run);
  fs::create_symlink(victim, run / "metrics.jsonl");

  const ProcessResult r = run_dtrain(train_flags({"--train_dir", run.string()}));

  EXPECT_EQ(r.exit_code, 2) << all_output(r);
  EXPECT_THAT(r.err, HasSubstr((run / "metrics.jsonl").string() + ": is a symbolic link"));
  EXPECT_EQ(read_bytes(victim), kVictimText);
}

TEST(RunFiles, AMetricsJsonlOfAnotherUserIsRefusedByName) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give a file to another user";
  const TempDir dir;
  const fs::path metrics = dir / "metrics.jsonl";
  std::ofstream(metrics) << kVictimText;
  ASSERT_EQ(::chown(metrics.c_str(), 65534, 65534), 0);

  const ProcessResult r = run_dtrain(train_flags({"--train_dir", dir.path().string()}));

  EXPECT_EQ(r.exit_code, 2) << all_output(r);
  EXPECT_THAT(r.err, HasSubstr(metrics.string() + ": belongs to uid 65534"));
  EXPECT_EQ(read_bytes(metrics), kVictimText);
}

// The event file's name is the time in seconds, the host and the pid: a user who can write to the
// log folder can plant links at the names a run is about to use. The child is held at a gate (a
// FIFO it reads before it becomes dtrain, keeping its pid) until the links for every second of
// the next five minutes are in place.
TEST(RunFiles, ALinkPlantedAtTheEventFilesPredictableNameIsRefusedAndItsTargetIsUntouched) {
  const TempDir dir;
  const fs::path victim = make_victim(dir);
  const fs::path logdir = dir / "logs";
  fs::create_directory(logdir);
  const fs::path gate = dir / "gate";
  ASSERT_EQ(::mkfifo(gate.c_str(), 0600), 0);
  DtrainProcess::Options options;
  options.prefix = {"sh", "-c", "read _ < \"$0\" && exec \"$@\"", gate.string()};
  DtrainProcess dtrain(train_flags({"--logdir", logdir.string()}), options);

  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  const std::string tail = fmt::format(".{}.{}.0", host_name(), dtrain.pid());
  for (int64_t second = now; second <= now + 300; ++second) {
    fs::create_symlink(victim, logdir / fmt::format("events.out.tfevents.{:010d}{}", second, tail));
  }
  std::ofstream(gate) << "go\n";  // opening blocks until the child reads the gate
  const ProcessResult r = dtrain.wait();

  EXPECT_EQ(r.exit_code, 2) << all_output(r);
  EXPECT_THAT(r.err, HasSubstr((logdir / "events.out.tfevents.").string()));
  EXPECT_THAT(r.err, HasSubstr(tail + ": already exists"));
  EXPECT_EQ(read_bytes(victim), kVictimText);
}

TEST(RunFiles, CheckpointsAndLogFilesAreCreatedForTheirOwnerAlone) {
  const TempDir dir;
  const ProcessResult r = run_dtrain(train_flags({"--train_dir", dir.path().string()}));
  ASSERT_EQ(r.exit_code, 0) << all_output(r);

  std::vector<fs::path> created = {dir / "metrics.jsonl", dir / "checkpoint",
                                   dir / "model.ckpt-20.safetensors"};
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    if (entry.path().filename().string().starts_with("events.out.tfevents."))
      created.push_back(entry.path());
  }
  ASSERT_EQ(created.size(), 4u) << "no event file in " << dir.path();
  for (const fs::path& file : created) {
    EXPECT_EQ(permission_bits(file), 0600u)
        << fmt::format("{:o} {}", permission_bits(file), file.string());
  }
}

}  // namespace
}  // namespace dtrain::testing
