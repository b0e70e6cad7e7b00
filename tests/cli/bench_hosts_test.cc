// The benchmarks' halves that run on hosts of their own (bench/netns_ps.sh,
// bench/netns_allreduce.sh), here both on loopback: each half in its own process, meeting over
// TCP with the secret from the environment, as the scripts start them; and bench allreduce's
// binding of ranks to cores.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "cluster/free_ports.h"
#include "support/process.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;

const std::string kSecret = "DTRAIN_SECRET=0123456789abcdef0123456789abcdef";

TEST(BenchHosts, PsTasksInOneProcessAndWorkersInAnotherMeasureOverTcp) {
  const std::vector<uint16_t> ports = pick_free_ports(2);
  const std::string port_list = std::to_string(ports[0]) + "," + std::to_string(ports[1]);
  const std::vector<std::string> common = {"bench",         "ps",      "--ps",          "2",
                                           "--workers",     "2",       "--host",        "127.0.0.1",
                                           "--ports",       port_list, "--model_bytes", "1MiB",
                                           "--secs",        "0.05",    "--min_rounds",  "3",
                                           "--warmup_secs", "0.01",    "--transport",   "tcp"};
  std::vector<std::string> ps_args = common;
  ps_args.insert(ps_args.end(), {"--role", "ps"});
  DtrainProcess ps(
      ps_args, {.extra_env = {kSecret}, .own_process_group = false, .prefix = {}, .program = {}});
  ps.wait_for_line("ps tasks serving 1048576 bytes on 127.0.0.1:" + port_list);

  std::vector<std::string> worker_args = common;
  worker_args.insert(worker_args.end(), {"--role", "workers"});
  const ProcessResult workers = run_dtrain(worker_args, {kSecret});
  ASSERT_EQ(workers.exit_code, 0) << all_output(workers);
  EXPECT_THAT(workers.out, HasSubstr("payloads over TCP to ps tasks at 127.0.0.1"));
  // A row for the size: 1048576 bytes in 2 shards (one per ps task), two workers' figures.
  EXPECT_THAT(workers.out,
              ::testing::ContainsRegex(R"( 1048576 +2 +[0-9]+ +[0-9.]+/[0-9.]+ +[0-9.]+/[0-9.]+ )"))
      << workers.out;
  // The ps half ends by itself once both workers have said they are done.
  const ProcessResult served = ps.wait();
  EXPECT_EQ(served.exit_code, 0) << all_output(served);
}

TEST(BenchHosts, AWorkersHalfWithAnotherSecretIsRefusedAndThePsHalfGoesOnWaiting) {
  const std::vector<uint16_t> ports = pick_free_ports(1);
  const std::vector<std::string> common = {"bench",         "ps",
                                           "--ps",          "1",
                                           "--workers",     "1",
                                           "--host",        "127.0.0.1",
                                           "--ports",       std::to_string(ports[0]),
                                           "--model_bytes", "64KiB",
                                           "--secs",        "0.05",
                                           "--transport",   "tcp"};
  std::vector<std::string> ps_args = common;
  ps_args.insert(ps_args.end(), {"--role", "ps"});
  DtrainProcess ps(
      ps_args, {.extra_env = {kSecret}, .own_process_group = false, .prefix = {}, .program = {}});
  ps.wait_for_line("ps tasks serving");
  std::vector<std::string> worker_args = common;
  worker_args.insert(worker_args.end(), {"--role", "workers"});
  const ProcessResult stranger =
      run_dtrain(worker_args, {"DTRAIN_SECRET=ffffffffffffffffffffffffffffffff"});
  EXPECT_NE(stranger.exit_code, 0) << all_output(stranger);
  // The ps half still serves the job's own workers: the right secret gets its figures.
  const ProcessResult own = run_dtrain(worker_args, {kSecret});
  EXPECT_EQ(own.exit_code, 0) << all_output(own);
  EXPECT_EQ(ps.wait().exit_code, 0);
}

TEST(BenchHosts, SplitHalvesNeedOnePortPerPsTask) {
  const ProcessResult r = run_dtrain({"bench", "ps", "--ps", "2", "--role", "workers", "--ports",
                                      "29999", "--model_bytes", "64KiB"},
                                     {kSecret});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--ports names 1 ports for --ps 2: give one per ps task"));
  const ProcessResult hosts =
      run_dtrain({"bench", "allreduce", "--rank", "0", "--ranks", "2", "--ports", "29998,29999",
                  "--hosts", "127.0.0.1", "--bytes", "4KiB"},
                 {kSecret});
  EXPECT_NE(hosts.exit_code, 0);
  EXPECT_THAT(hosts.err, HasSubstr("--hosts names 1 hosts for --ranks 2: give one per rank"));
}

TEST(BenchHosts, AllreduceRanksAreBoundToACoreEachUnlessToldNot) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "needs two cores for two ranks";
  const ProcessResult bound = run_dtrain({"bench", "allreduce", "--ranks", "2", "--bytes", "4KiB",
                                          "--secs", "0.05", "--transport", "tcp"});
  ASSERT_EQ(bound.exit_code, 0) << all_output(bound);
  EXPECT_THAT(bound.out, HasSubstr("local processes, each bound to a core"));
  const ProcessResult free =
      run_dtrain({"bench", "allreduce", "--ranks", "2", "--bytes", "4KiB", "--secs", "0.05",
                  "--transport", "tcp", "--bind_to", "none"});
  ASSERT_EQ(free.exit_code, 0) << all_output(free);
  EXPECT_THAT(free.out, HasSubstr("local processes, not bound to cores"));
  const ProcessResult bad = run_dtrain({"bench", "allreduce", "--bind_to", "socket"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("--bind_to"));
}

}  // namespace
}  // namespace dtrain::testing
