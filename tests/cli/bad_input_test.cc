// Bad files reach the user as one clear error naming the file and the problem, never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "support/process.h"
#include "support/temp_dir.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;

const char* const kMnistFiles[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                   "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

// A copy of MNIST in dir, to be damaged by the test.
void copy_mnist(const std::filesystem::path& dir) {
  for (const char* name : kMnistFiles) std::filesystem::copy_file(mnist_dir() / name, dir / name);
}

void expect_clean_failure(const ProcessResult& r, const std::string& file,
                          const std::string& problem) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(count_lines_containing(r.err, ""), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(file));
  EXPECT_THAT(r.err, HasSubstr(problem));
}

TEST(BadInputTest, TruncatedIdxFileNamesTheFile) {
  TempDir dir;
  copy_mnist(dir.path());
  std::filesystem::resize_file(dir / "t10k-images-idx3-ubyte", 1000);
  ProcessResult r = run_dtrain({"train", "--model", "softmax", "--data_dir", dir.path().string()});
  expect_clean_failure(r, "t10k-images-idx3-ubyte", "truncated");
}

TEST(BadInputTest, WrongMagicNamesTheFile) {
  TempDir dir;
  copy_mnist(dir.path());
  std::string bytes = read_bytes(dir / "train-labels-idx1-ubyte");
  bytes[0] = 0x12;
  write_bytes(dir / "train-labels-idx1-ubyte", bytes);
  ProcessResult r = run_dtrain({"train", "--model", "softmax", "--data_dir", dir.path().string()});
  expect_clean_failure(r, "train-labels-idx1-ubyte", "magic");
}

TEST(BadInputTest, MissingDataFolderSaysHowToFetchIt) {
  TempDir dir;
  ProcessResult r = run_dtrain({"train", "--data_dir", (dir.path() / "none").string()});
  expect_clean_failure(r, "none", "fetch_mnist.sh");
}

TEST(BadInputTest, CheckpointWithAFlippedByteIsRejectedByEval) {
  TempDir dir;
  ProcessResult train = run_dtrain({"train", "--model", "softmax", "--train_steps", "20",
                                    "--train_dir", dir.path().string(), "--log_every", "0"});
  ASSERT_EQ(train.exit_code, 0) << train.err;
  const auto path = dir / "model.ckpt-20.safetensors";
  std::string bytes = read_bytes(path);
  bytes[bytes.size() - 100] ^= 0x01;
  write_bytes(path, bytes);
  ProcessResult r = run_dtrain({"eval", "--checkpoint", path.string()});
  expect_clean_failure(r, "model.ckpt-20.safetensors", "checksum");
}

TEST(BadInputTest, TrainingSkipsACorruptNewestCheckpointAndNamesIt) {
  TempDir dir;
  const std::string train_dir = dir.path().string();
  ASSERT_EQ(run_dtrain({"train", "--model", "softmax", "--train_steps", "20", "--save_steps", "10",
                        "--train_dir", train_dir, "--log_every", "0"})
                .exit_code,
            0);
  const auto newest = dir / "model.ckpt-20.safetensors";
  std::string bytes = read_bytes(newest);
  bytes[bytes.size() / 2] ^= 0x40;
  write_bytes(newest, bytes);
  ProcessResult r = run_dtrain({"train", "--model", "softmax", "--train_steps", "30", "--train_dir",
                                train_dir, "--log_every", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("skipped checkpoint"));
  EXPECT_THAT(r.out, HasSubstr("model.ckpt-20.safetensors"));
  EXPECT_THAT(r.out, HasSubstr("at global step 10"));
}

TEST(BadInputTest, UnknownAllreduceAlgorithmListsTheKnownOnes) {
  ProcessResult r = run_dtrain({"bench", "allreduce", "--algorithm", "tree"});
  EXPECT_EQ(r.exit_code, 2) << r.err;  // a usage error
  EXPECT_EQ(count_lines_containing(r.err, ""), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--algorithm: tree not in {auto,ring,halving_doubling}"));
}

// A bad --transport lists the choices (under train, its refusal under a local strategy is in
// tests/plan/flags_test.cc).
TEST(BadInputTest, ABadTransportListsTheChoices) {
  for (const char* bench : {"allreduce", "ps"}) {
    ProcessResult bad = run_dtrain({"bench", bench, "--transport", "rdma"});
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
    EXPECT_THAT(bad.err, HasSubstr("--transport: rdma not in {auto,tcp,shm}"));
  }
}

}  // namespace
}  // namespace dtrain::testing
