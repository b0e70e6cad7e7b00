// The benchmarks' --csv rows, read back as a plotting tool would: one header, one row per size
// and run, and figures that agree with each other (bus bandwidth from algorithm bandwidth, the
// total from the per-worker figure), so a sweep's curves can be trusted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/temp_dir.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;

// A CSV file as rows of column name -> field; the header must come first and only once.
std::vector<std::map<std::string, std::string>> read_rows(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
  auto split = [](const std::string& text) {
    std::vector<std::string> fields;
    std::stringstream stream(text);
    for (std::string field; std::getline(stream, field, ',');) fields.push_back(field);
    return fields;
  };
  while (std::getline(in, line)) {
    if (header.empty()) {
      header = split(line);
      continue;
    }
    const std::vector<std::string> fields = split(line);
    EXPECT_EQ(fields.size(), header.size()) << line;
    EXPECT_NE(fields, header) << "the header was written twice";
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < fields.size() && i < header.size(); ++i) row[header[i]] = fields[i];
    rows.push_back(row);
  }
  return rows;
}

double number(const std::map<std::string, std::string>& row, const std::string& column) {
  return std::stod(row.at(column));
}

TEST(BenchCsv, AllreduceRowsAccumulateOverRunsAndNameTheirTransport) {
  TempDir dir;
  const std::string csv = (dir.path() / "allreduce.csv").string();
  for (const char* transport : {"tcp", "auto"}) {
    const ProcessResult r =
        run_dtrain({"bench", "allreduce", "--ranks", "3", "--bytes", "4KiB,64KiB", "--secs", "0.05",
                    "--min_iters", "3", "--transport", transport, "--csv", csv});
    ASSERT_EQ(r.exit_code, 0) << all_output(r);
  }
  const auto rows = read_rows(csv);
  ASSERT_EQ(rows.size(), 4u);
  const char* transports[] = {"tcp", "tcp", "shm", "shm"};
  const double bytes[] = {4096, 65536, 4096, 65536};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].at("ranks"), "3");
    EXPECT_EQ(rows[i].at("transport"), transports[i]) << "row " << i;
    EXPECT_EQ(number(rows[i], "bytes"), bytes[i]);
    EXPECT_GE(number(rows[i], "iters"), 3);
    const double ms = number(rows[i], "median_ms");
    EXPECT_GT(ms, 0);
    EXPECT_NEAR(number(rows[i], "algbw_gbps"), bytes[i] / (ms * 1e-3) / 1e9,
                1e-3 + 1e-2 * number(rows[i], "algbw_gbps"));
    EXPECT_NEAR(number(rows[i], "busbw_gbps"), number(rows[i], "algbw_gbps") * 4.0 / 3.0,
                2e-4 + 1e-3 * number(rows[i], "busbw_gbps"));
  }
}

TEST(BenchCsv, PsRowsGiveEverySizeAndTransportAndAFileOfOtherColumnsIsRefusedByName) {
  TempDir dir;
  const std::string csv = (dir.path() / "ps.csv").string();
  for (const char* transport : {"tcp", "shm"}) {
    const ProcessResult r =
        run_dtrain({"bench", "ps", "--ps", "2", "--workers", "2", "--model_bytes", "64KiB,1MiB",
                    "--secs", "0.05", "--min_rounds", "3", "--warmup_secs", "0.01", "--transport",
                    transport, "--csv", csv});
    ASSERT_EQ(r.exit_code, 0) << all_output(r);
    // The header says which way the payloads went.
    EXPECT_THAT(r.out, HasSubstr(std::string(transport) == "tcp"
                                     ? "payloads over loopback TCP (--transport tcp)"
                                     : "payloads copied by the ps out of and into the workers' "
                                       "memory (process_vm_readv/writev), announced through "
                                       "shared mailboxes (--transport shm)"))
        << r.out;
  }
  const auto rows = read_rows(csv);
  ASSERT_EQ(rows.size(), 4u);
  const double bytes[] = {65536, 1 << 20, 65536, 1 << 20};
  const char* transports[] = {"tcp", "tcp", "shm", "shm"};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].at("ps"), "2");
    EXPECT_EQ(rows[i].at("workers"), "2");
    EXPECT_EQ(rows[i].at("transport"), transports[i]) << "row " << i;
    EXPECT_EQ(number(rows[i], "model_bytes"), bytes[i]);
    EXPECT_GE(number(rows[i], "rounds"), 3);
    EXPECT_GT(number(rows[i], "round_ms"), 0);
    EXPECT_NEAR(number(rows[i], "gbps_total"), 2 * number(rows[i], "gbps_per_worker"),
                2e-4 + 1e-3 * number(rows[i], "gbps_total"));
  }

  // The ps file given to the all-reduce benchmark: refused before any rank starts, by name.
  const ProcessResult wrong =
      run_dtrain({"bench", "allreduce", "--bytes", "4KiB", "--secs", "0.05", "--csv", csv});
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_THAT(wrong.err, HasSubstr("--csv " + csv + ": holds other columns"));
  EXPECT_EQ(read_rows(csv).size(), 4u);  // and left as it was
}

TEST(BenchCsv, EveryTaskSaysItsPeakResidentMemory) {
  const ProcessResult r = run_dtrain({"train", "--strategy", "async", "--ps", "1", "--workers", "1",
                                      "--model", "softmax", "--train_steps", "5", "--log_every",
                                      "0", "--threads", "1", "--data_dir", mnist_dir().string()});
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  for (const std::string task : {"ps0: peak resident memory ", "worker=0: peak resident memory "}) {
    const size_t at = r.out.find(task);
    ASSERT_NE(at, std::string::npos) << task << "\n" << r.out;
    // The worker holds MNIST's 60000 training images, 47 MB even as bytes; a ps a softmax.
    const double mib = std::stod(r.out.substr(at + task.size()));
    EXPECT_GT(mib, task[0] == 'p' ? 1.0 : 45.0) << r.out;
  }
}

}  // namespace
}  // namespace dtrain::testing
