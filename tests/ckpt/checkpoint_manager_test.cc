// CheckpointManager: naming, index, retention, and restore of the newest checkpoint that validates.
#include "ckpt/checkpoint_manager.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "base/error.h"
#include "support/temp_dir.h"

namespace dtrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

// Saves a one-tensor checkpoint whose value encodes the step.
std::filesystem::path save_step(CheckpointManager& manager, int64_t step) {
  std::vector<float> w{static_cast<float>(step), 1.0f};
  std::vector<TensorRef> refs{{"w", {2}, w}};
  return manager.save(CheckpointInfo{step, "mlp", "sgd", {{"lr", 0.1}}}, refs);
}

std::vector<std::string> file_names(const std::vector<std::filesystem::path>& paths) {
  std::vector<std::string> names;
  for (const auto& p : paths) names.push_back(p.filename().string());
  return names;
}

nlohmann::json read_index(const TempDir& dir) {
  return nlohmann::json::parse(read_bytes(dir / "checkpoint"));
}

void flip_last_byte(const std::filesystem::path& path) {
  std::string bytes = read_bytes(path);
  bytes.back() ^= 0x01;
  write_bytes(path, bytes);
}

TEST(CheckpointManagerTest, SaveWritesAStepNamedFileAndAnIndexNamingIt) {
  TempDir dir;
  CheckpointManager manager(dir / "train");  // created by the first save

  std::filesystem::path path = save_step(manager, 100);

  EXPECT_EQ(path, dir / "train" / "model.ckpt-100.safetensors");
  EXPECT_EQ(read_checkpoint(path).global_step, 100);
  nlohmann::json index = nlohmann::json::parse(read_bytes(dir / "train" / "checkpoint"));
  EXPECT_EQ(index["latest"], "model.ckpt-100.safetensors");
  EXPECT_EQ(index["all"], nlohmann::json::array({"model.ckpt-100.safetensors"}));
}

TEST(CheckpointManagerTest, RetentionKeepsExactlyTheNewestKeepAndTheIndexListsThem) {
  TempDir dir;
  CheckpointManager manager(dir.path(), /*keep=*/3);
  for (int64_t step = 1; step <= 7; ++step) save_step(manager, step * 10);

  EXPECT_THAT(file_names(manager.list()),
              ElementsAre("model.ckpt-50.safetensors", "model.ckpt-60.safetensors",
                          "model.ckpt-70.safetensors"));
  nlohmann::json index = read_index(dir);
  EXPECT_EQ(index["latest"], "model.ckpt-70.safetensors");
  EXPECT_EQ(index["all"],
            nlohmann::json::array({"model.ckpt-50.safetensors", "model.ckpt-60.safetensors",
                                   "model.ckpt-70.safetensors"}));
}

TEST(CheckpointManagerTest, KeepZeroKeepsEveryCheckpoint) {
  TempDir dir;
  CheckpointManager manager(dir.path(), /*keep=*/0);
  for (int64_t step = 1; step <= 8; ++step) save_step(manager, step);
  EXPECT_EQ(manager.list().size(), 8u);
}

TEST(CheckpointManagerTest, SavingTheSameStepTwiceOverwritesIt) {
  TempDir dir;
  CheckpointManager manager(dir.path());
  save_step(manager, 5);
  std::vector<float> w{-1.0f, -2.0f};
  std::vector<TensorRef> refs{{"w", {2}, w}};
  manager.save(CheckpointInfo{5, "mlp", "adam", nullptr}, refs);

  ASSERT_EQ(manager.list().size(), 1u);
  Checkpoint ckpt = read_checkpoint(manager.list()[0]);
  EXPECT_EQ(ckpt.optimizer, "adam");
  EXPECT_EQ(ckpt.tensors[0].values, w);
}

TEST(CheckpointManagerTest, AnOlderSaveSurvivesItsOwnRetention) {
  TempDir dir;
  CheckpointManager manager(dir.path(), /*keep=*/2);
  save_step(manager, 10);
  save_step(manager, 11);

  std::filesystem::path path = save_step(manager, 5);

  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_THAT(file_names(manager.list()),
              ElementsAre("model.ckpt-5.safetensors", "model.ckpt-10.safetensors",
                          "model.ckpt-11.safetensors"));
}

TEST(CheckpointManagerTest, ListIsOrderedByStepNotByName) {
  TempDir dir;
  CheckpointManager manager(dir.path(), 0);
  for (int64_t step : {100, 9, 10}) save_step(manager, step);
  EXPECT_THAT(file_names(manager.list()),
              ElementsAre("model.ckpt-9.safetensors", "model.ckpt-10.safetensors",
                          "model.ckpt-100.safetensors"));
}

TEST(CheckpointManagerTest, FilesThatOnlyResembleCheckpointsAreIgnored) {
  TempDir dir;
  CheckpointManager manager(dir.path());
  save_step(manager, 3);
  for (const char* name : {"model.ckpt-007.safetensors", "model.ckpt-x.safetensors",
                           "model.ckpt-.safetensors", "model.ckpt-99999999999999999999.safetensors",
                           "model.ckpt-4.safetensors.bak", "notes.txt"}) {
    write_bytes(dir / name, "not a checkpoint");
  }
  std::filesystem::create_directory(dir / "model.ckpt-8.safetensors");

  EXPECT_THAT(file_names(manager.list()), ElementsAre("model.ckpt-3.safetensors"));
  CheckpointManager::RestoreResult result = manager.restore_latest();
  ASSERT_TRUE(result.checkpoint.has_value());
  EXPECT_EQ(result.checkpoint->global_step, 3);
  EXPECT_TRUE(result.skipped.empty());
}

TEST(CheckpointManagerTest, StepNamesRoundTrip) {
  EXPECT_EQ(CheckpointManager::file_name(42), "model.ckpt-42.safetensors");
  EXPECT_EQ(CheckpointManager::step_of("model.ckpt-42.safetensors"), 42);
  EXPECT_EQ(CheckpointManager::step_of("model.ckpt-0.safetensors"), 0);
  EXPECT_EQ(CheckpointManager::step_of("model.ckpt-042.safetensors"), std::nullopt);
  EXPECT_EQ(CheckpointManager::step_of("model.ckpt--1.safetensors"), std::nullopt);
}

TEST(CheckpointManagerTest, SaveRejectsANegativeStep) {
  TempDir dir;
  CheckpointManager manager(dir.path());
  EXPECT_THROW(save_step(manager, -1), CheckpointError);
}

TEST(CheckpointManagerTest, RestoreLatestReturnsTheNewestCheckpoint) {
  TempDir dir;
  CheckpointManager manager(dir.path());
  for (int64_t step : {1, 2, 3}) save_step(manager, step);

  CheckpointManager::RestoreResult result = manager.restore_latest();

  ASSERT_TRUE(result.checkpoint.has_value());
  EXPECT_EQ(result.checkpoint->global_step, 3);
  EXPECT_EQ(result.checkpoint->tensors[0].values[0], 3.0f);
  EXPECT_EQ(result.path, dir / "model.ckpt-3.safetensors");
  EXPECT_TRUE(result.skipped.empty());
}

TEST(CheckpointManagerTest, RestoreLatestSkipsACorruptedNewestCheckpointAndSaysWhy) {
  TempDir dir;
  CheckpointManager manager(dir.path());
  save_step(manager, 1);
  save_step(manager, 2);
  std::filesystem::path newest = save_step(manager, 3);
  flip_last_byte(newest);

  CheckpointManager::RestoreResult result = manager.restore_latest();

  ASSERT_TRUE(result.checkpoint.has_value());
  EXPECT_EQ(result.checkpoint->global_step, 2);
  EXPECT_EQ(result.path, dir / "model.ckpt-2.safetensors");
  ASSERT_EQ(result.skipped.size(), 1u);
  EXPECT_THAT(result.skipped[0], HasSubstr("model.ckpt-3.safetensors"));
  EXPECT_THAT(result.skipped[0], HasSubstr("checksum"));
}

TEST(CheckpointManagerTest,
     RestoreLatestWithEveryCheckpointCorruptFindsNoneAndListsAllNewestFirst) {
  TempDir dir;
  CheckpointManager manager(dir.path());
  flip_last_byte(save_step(manager, 1));
  write_bytes(save_step(manager, 2), "");  // truncated to nothing

  CheckpointManager::RestoreResult result = manager.restore_latest();

  EXPECT_FALSE(result.checkpoint.has_value());
  ASSERT_EQ(result.skipped.size(), 2u);
  EXPECT_THAT(result.skipped[0], HasSubstr("model.ckpt-2.safetensors"));
  EXPECT_THAT(result.skipped[1], HasSubstr("model.ckpt-1.safetensors"));
}

TEST(CheckpointManagerTest, RestoreFromAMissingOrEmptyDirectoryFindsNothingWithoutError) {
  TempDir dir;
  CheckpointManager missing(dir / "does-not-exist");
  CheckpointManager::RestoreResult result = missing.restore_latest();
  EXPECT_FALSE(result.checkpoint.has_value());
  EXPECT_TRUE(result.skipped.empty());
  EXPECT_TRUE(missing.list().empty());

  CheckpointManager empty(dir.path());
  EXPECT_FALSE(empty.restore_latest().checkpoint.has_value());
}

TEST(CheckpointManagerTest, RestoreScansTheDirectoryInsteadOfTrustingTheIndex) {
  TempDir dir;
  CheckpointManager manager(dir.path());
  save_step(manager, 1);
  save_step(manager, 2);
  write_bytes(dir / "checkpoint", R"({"latest": "model.ckpt-1.safetensors"})");  // stale
  EXPECT_EQ(manager.restore_latest().checkpoint->global_step, 2);

  write_bytes(dir / "checkpoint", "{garbage");  // corrupt
  EXPECT_EQ(manager.restore_latest().checkpoint->global_step, 2);
  save_step(manager, 3);  // rewrites it
  EXPECT_EQ(read_index(dir)["latest"], "model.ckpt-3.safetensors");
}

// The pid of a process that has exited and been reaped: no process has it (until pids wrap).
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

TEST(CheckpointManagerTest, LeftoverTempFilesAreIgnoredByRestoreAndRemovedByTheNextSave) {
  TempDir dir;
  CheckpointManager manager(dir.path());
  save_step(manager, 2);
  const pid_t crashed_writer = dead_pid();
  std::filesystem::path crashed =
      dir / fmt::format("model.ckpt-9.safetensors.tmp-{}-0", crashed_writer);
  std::filesystem::path crashed_index = dir / fmt::format("checkpoint.tmp-{}", crashed_writer);
  // A writer that is alive (pid 1 always is) may still finish: its file is not ours to remove.
  std::filesystem::path live = dir / "model.ckpt-8.safetensors.tmp-1-0";
  std::filesystem::path unrelated = dir / "notes.tmp-1";
  write_bytes(crashed, "half a checkpoint");
  write_bytes(crashed_index, "{");
  write_bytes(live, "being written");
  write_bytes(unrelated, "not ours");

  CheckpointManager::RestoreResult result = manager.restore_latest();
  ASSERT_TRUE(result.checkpoint.has_value());
  EXPECT_EQ(result.checkpoint->global_step, 2);
  EXPECT_TRUE(result.skipped.empty());

  save_step(manager, 3);
  EXPECT_FALSE(std::filesystem::exists(crashed));
  EXPECT_FALSE(std::filesystem::exists(crashed_index));
  EXPECT_TRUE(std::filesystem::exists(live));
  EXPECT_TRUE(std::filesystem::exists(unrelated));
}

TEST(CheckpointManagerTest, SaveIntoAnUncreatableDirectoryIsAnIoErrorNamingIt) {
  TempDir dir;
  write_bytes(dir / "file", "x");
  CheckpointManager manager(dir / "file" / "train");
  try {
    save_step(manager, 1);
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr((dir / "file" / "train").string()));
  }
}

}  // namespace
}  // namespace dtrain
