// `dtrain task` under launchers that give ranks, not addresses: torchrun-style variables on
// processes the test starts, and Open MPI's real mpirun. The ranks meet at the rendezvous and
// train to the accuracy a local cluster reaches; all-reduce ranks end with equal parameters.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cluster/free_ports.h"
#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/slurm_cluster.h"
#include "support/temp_dir.h"
#include "support/text_match.h"
#include "support/virtual_network.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::string_view kLauncherSecret = "launcher test secret, of 32 bytes";

std::vector<std::string> task_flags() {
  return {"task",      "--model", "softmax",    "--epochs",           "1",
          "--threads", "1",       "--data_dir", mnist_dir().string(), "--log_every",
          "0"};
}

// Every "test accuracy = X" in text.
std::vector<double> accuracies_in(const std::string& text) {
  std::vector<double> found;
  for (const Match& m : all_matches(text, "test accuracy = ([0-9.]+)"))
    found.push_back(std::stod(m[1]));
  return found;
}

std::vector<std::string> checksums_in(const std::string& text) {
  std::vector<std::string> found;
  for (const Match& m : all_matches(text, "parameters crc32c = (0x[0-9A-F]+)"))
    found.push_back(m[1]);
  return found;
}

bool on_path(const std::string& command) {
  return run_command({"sh", "-c", "command -v " + command}).exit_code == 0;
}

// What a torchrun-style launcher gives rank `rank` of `world` meeting at 127.0.0.1:port.
std::vector<std::string> loopback_rank_env(int rank, int world, uint16_t port,
                                           std::string_view secret = kLauncherSecret) {
  return {fmt::format("RANK={}", rank), fmt::format("WORLD_SIZE={}", world),
          "MASTER_ADDR=127.0.0.1", fmt::format("MASTER_PORT={}", port),
          fmt::format("DTRAIN_SECRET={}", secret)};
}

// Open MPI's mpirun starting `ranks` copies of dtrain, told where rank 0 listens (or, without
// `master_addr`, only its port: the ranks then find that they all share this host).
DtrainProcess::Options mpirun_options(int ranks, bool master_addr = true) {
  DtrainProcess::Options options;
  options.own_process_group = true;  // mpirun's ranks die with it if the test gives up
  options.extra_env = {fmt::format("DTRAIN_SECRET={}", kLauncherSecret)};
  options.prefix = {"mpirun",
                    "--allow-run-as-root",
                    "--oversubscribe",
                    "-np",
                    std::to_string(ranks),
                    "-x",
                    "DTRAIN_SECRET",
                    "-x",
                    fmt::format("MASTER_PORT={}", pick_free_ports(1)[0])};
  if (master_addr) {
    options.prefix.insert(options.prefix.end() - 2, {"-x", "MASTER_ADDR=127.0.0.1"});
  }
  return options;
}

// Two ranks given only what torchrun gives: RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT (and the secret).
std::vector<ProcessResult> run_torchrun_style(int world, const std::vector<std::string>& flags) {
  const uint16_t port = pick_free_ports(1)[0];
  std::vector<std::unique_ptr<DtrainProcess>> ranks;
  for (int r = 0; r < world; ++r) {
    DtrainProcess::Options options;
    options.extra_env = loopback_rank_env(r, world, port);
    options.extra_env.push_back(fmt::format("LOCAL_RANK={}", r));
    ranks.push_back(std::make_unique<DtrainProcess>(flags, options));
  }
  std::vector<ProcessResult> results;
  for (auto& rank : ranks) results.push_back(rank->wait());
  return results;
}

TEST(Launchers, TwoTorchrunStyleRanksTrainAllreduceToEqualParameters) {
  const std::vector<ProcessResult> results = run_torchrun_style(2, task_flags());
  std::vector<std::string> checksums;
  for (const ProcessResult& r : results) {
    ASSERT_EQ(r.exit_code, 0) << all_output(r);
    EXPECT_THAT(r.out, HasSubstr("from torchrun (RANK, WORLD_SIZE); rendezvous at 127.0.0.1:"));
    const std::vector<double> accuracy = accuracies_in(r.out);
    ASSERT_FALSE(accuracy.empty()) << r.out;
    EXPECT_GE(accuracy.back(), 0.90) << r.out;
    const std::vector<std::string> crc = checksums_in(r.out);
    ASSERT_EQ(crc.size(), 1u) << r.out;
    checksums.push_back(crc[0]);
  }
  EXPECT_EQ(checksums[0], checksums[1]);
}

TEST(Launchers, ThreeTorchrunStyleRanksWithOnePsTrainAsync) {
  const std::vector<ProcessResult> results =
      run_torchrun_style(3, concat(task_flags(), {"--ps", "1"}));
  for (const ProcessResult& r : results) ASSERT_EQ(r.exit_code, 0) << all_output(r);
  EXPECT_THAT(results[0].out, HasSubstr("rank 0 is ps:0"));
  for (int w : {1, 2}) {
    EXPECT_THAT(results[w].out, HasSubstr(fmt::format("rank {} is worker:{}", w, w - 1)));
    const std::vector<double> accuracy = accuracies_in(results[w].out);
    ASSERT_FALSE(accuracy.empty()) << results[w].out;
    EXPECT_GE(accuracy.back(), 0.90) << results[w].out;
  }
}

TEST(Launchers, ADuplicateRankEndsEveryRankWithOneErrorNamingIt) {
  const uint16_t port = pick_free_ports(1)[0];
  std::vector<std::unique_ptr<DtrainProcess>> ranks;
  for (int r : {0, 1, 1}) {
    DtrainProcess::Options options;
    options.extra_env = loopback_rank_env(r, 3, port);
    ranks.push_back(std::make_unique<DtrainProcess>(task_flags(), options));
  }
  for (auto& rank : ranks) {
    const ProcessResult r = rank->wait();
    EXPECT_EQ(r.exit_code, 1) << all_output(r);
    EXPECT_THAT(r.err, HasSubstr("rank 1 was claimed twice: from 127.0.0.1:")) << all_output(r);
  }
}

TEST(Launchers, FlagsOfTheLocalLauncherAreRefusedWithTheReason) {
  const std::vector<ProcessResult> results =
      run_torchrun_style(2, concat(task_flags(), {"--workers", "2"}));
  for (const ProcessResult& r : results) {
    EXPECT_EQ(r.exit_code, 2) << all_output(r);
    EXPECT_THAT(r.err, HasSubstr("--workers: the launcher that started this task decides"));
  }
}

TEST(Launchers, OpenMpisMpirunStartsThreeRanksWithOnePs) {
  if (!on_path("mpirun")) GTEST_SKIP() << "mpirun is not installed (Debian package openmpi-bin)";
  DtrainProcess mpirun(concat(task_flags(), {"--ps", "1"}), mpirun_options(3));
  const ProcessResult r = mpirun.wait();
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  EXPECT_EQ(count_lines_containing(r.out, "from Open MPI (OMPI_COMM_WORLD_RANK"), 3) << r.out;
  const std::vector<double> accuracy = accuracies_in(r.out);
  ASSERT_EQ(accuracy.size(), 2u) << r.out;
  for (double a : accuracy) EXPECT_GE(a, 0.90) << r.out;
}

// `dtrain train` under mpirun is one job, as `dtrain task` is, not one local run per rank; on one
// host it needs no MASTER_ADDR.
TEST(Launchers, OpenMpisMpirunMakesTrainOneAllreduceJobOfTwoRanksThatEndAlike) {
  if (!on_path("mpirun")) GTEST_SKIP() << "mpirun is not installed (Debian package openmpi-bin)";
  std::vector<std::string> flags = task_flags();
  flags[0] = "train";
  DtrainProcess mpirun(flags, mpirun_options(2, /*master_addr=*/false));
  const ProcessResult r = mpirun.wait();
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  EXPECT_EQ(count_lines_containing(r.out, "rendezvous at 127.0.0.1:"), 2) << r.out;
  EXPECT_EQ(
      count_lines_containing(r.out, "(every rank on this host, as OMPI_COMM_WORLD_LOCAL_SIZE"), 2)
      << r.out;
  EXPECT_THAT(r.out, HasSubstr("dtrain train: rank 1 is worker:1 of worker=[")) << r.out;
  const std::vector<double> accuracy = accuracies_in(r.out);
  ASSERT_EQ(accuracy.size(), 2u) << r.out;
  for (double a : accuracy) EXPECT_GE(a, 0.90) << r.out;
  const std::vector<std::string> crc = checksums_in(r.out);
  ASSERT_EQ(crc.size(), 2u) << r.out;
  EXPECT_EQ(crc[0], crc[1]);
  EXPECT_THAT(r.err, Not(HasSubstr("error")));
}

// srun on a one-node Slurm cluster the test starts itself, with no rendezvous host given: the host
// is the job's node list's first. The port is one picked free rather than the default 29500,
// which anything else on the machine may hold (a torchrun job, the same test in another
// checkout); LaunchEnv's tests check the default.
TEST(Launchers, SlurmsSrunStartsTwoAllreduceRanksThatMeetAtTheFirstNode) {
  if (const std::string why = OneNodeSlurm::unavailable(); !why.empty()) GTEST_SKIP() << why;
  const OneNodeSlurm slurm;
  const uint16_t port = pick_free_ports(1)[0];
  std::vector<std::string> env = slurm.env();
  env.push_back(fmt::format("DTRAIN_SECRET={}", kLauncherSecret));
  env.push_back(fmt::format("MASTER_PORT={}", port));
  DtrainProcess::Options options;
  options.own_process_group = true;
  options.extra_env = env;
  options.prefix = {"srun", "-n", "2"};
  DtrainProcess srun(task_flags(), options);
  const ProcessResult r = srun.wait();
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  EXPECT_EQ(count_lines_containing(
                r.out, fmt::format("from Slurm (SLURM_PROCID, SLURM_NTASKS); rendezvous at "
                                   "localhost:{} (the first host of SLURM_JOB_NODELIST)",
                                   port)),
            2)
      << r.out;
  const std::vector<double> accuracy = accuracies_in(r.out);
  ASSERT_EQ(accuracy.size(), 2u) << r.out;
  for (double a : accuracy) EXPECT_GE(a, 0.90) << r.out;
  const std::vector<std::string> crc = checksums_in(r.out);
  ASSERT_EQ(crc.size(), 2u) << r.out;
  EXPECT_EQ(crc[0], crc[1]);
}

// deploy/slurm/dtrain.sbatch as a user would submit it, on the one-node cluster: two tasks on the
// one node instead of one on each of two (the script's defaults).
TEST(Launchers, TheSbatchScriptTrainsOnTheOneNodeCluster) {
  if (const std::string why = OneNodeSlurm::unavailable(); !why.empty()) GTEST_SKIP() << why;
  const OneNodeSlurm slurm;
  const TempDir dir;
  std::ofstream(dir / "secret") << kLauncherSecret << "\n";
  std::filesystem::permissions(
      dir / "secret", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::vector<std::string> env = slurm.env();
  // A port picked free, as the srun test picks its own: the default may be taken.
  env.insert(env.end(), {"DTRAIN=" + std::string(DTRAIN_BINARY),
                         "DTRAIN_SECRET_FILE=" + (dir / "secret").string(),
                         fmt::format("MASTER_PORT={}", pick_free_ports(1)[0])});
  const std::vector<std::string> flags = task_flags();
  std::vector<std::string> sbatch = {
      "sbatch",
      "--wait",
      "--nodes=1",
      "--ntasks-per-node=2",
      "--output=" + (dir / "job.out").string(),
      std::string(DTRAIN_SOURCE_DIR) + "/deploy/slurm/dtrain.sbatch"};
  sbatch.insert(sbatch.end(), flags.begin() + 1, flags.end());  // the script says `task` itself
  const ProcessResult r = run_command(sbatch, env);
  std::ifstream job(dir / "job.out");
  const std::string out((std::istreambuf_iterator<char>(job)), std::istreambuf_iterator<char>());
  ASSERT_EQ(r.exit_code, 0) << all_output(r) << out;
  const std::vector<std::string> crc = checksums_in(out);
  ASSERT_EQ(crc.size(), 2u) << out;
  EXPECT_EQ(crc[0], crc[1]);
  for (double a : accuracies_in(out)) EXPECT_GE(a, 0.90) << out;
}

TEST(Launchers, TheSbatchScriptRefusesASecretOthersMayRead) {
  const TempDir dir;
  std::ofstream(dir / "secret") << kLauncherSecret << "\n";
  std::filesystem::permissions(
      dir / "secret", std::filesystem::perms::owner_read | std::filesystem::perms::group_read);
  const ProcessResult r =
      run_command({"bash", std::string(DTRAIN_SOURCE_DIR) + "/deploy/slurm/dtrain.sbatch"},
                  {"DTRAIN_SECRET_FILE=" + (dir / "secret").string()});
  EXPECT_EQ(r.exit_code, 2) << all_output(r);
  EXPECT_THAT(r.err, HasSubstr("may be read by others (mode 440): chmod 600 it"));
}

// deploy/k8s/mpijob.yaml, read by PyYAML: mpirun starts one rank per worker slot, rank 0's host is
// the first worker pod's name as the operator makes it, and --secret_file reads the Secret where
// the worker pods mount it, readable by its owner alone.
TEST(Launchers, TheMpiJobManifestStartsOneRankPerWorkerSlotThatMeetAtWorkerZero) {
  const std::string manifest = std::string(DTRAIN_SOURCE_DIR) + "/deploy/k8s/mpijob.yaml";
  const ProcessResult parsed = run_command(
      {"python3", "-c",
       "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))", manifest});
  ASSERT_EQ(parsed.exit_code, 0) << all_output(parsed);
  const nlohmann::json job = nlohmann::json::parse(parsed.out);
  EXPECT_EQ(job.at("kind"), "MPIJob");
  const std::string name = job.at("metadata").at("name");
  const std::string ns = job.at("metadata").at("namespace");
  const nlohmann::json& spec = job.at("spec");
  const nlohmann::json& worker = spec.at("mpiReplicaSpecs").at("Worker");
  const int slots = worker.at("replicas").get<int>() * spec.at("slotsPerWorker").get<int>();
  const std::vector<std::string> command = spec.at("mpiReplicaSpecs")
                                               .at("Launcher")
                                               .at("template")
                                               .at("spec")
                                               .at("containers")
                                               .at(0)
                                               .at("command");
  auto after = [&](const std::string& flag) {
    const auto at = std::find(command.begin(), command.end(), flag);
    return at == command.end() || at + 1 == command.end() ? std::string() : *(at + 1);
  };
  EXPECT_EQ(command.at(0), "mpirun");
  EXPECT_EQ(after("-np"), std::to_string(slots));
  EXPECT_THAT(command, ::testing::Contains(
                           fmt::format("MASTER_ADDR={}-worker-0.{}.{}.svc", name, name, ns)));
  EXPECT_THAT(command, ::testing::Contains("task"));
  const nlohmann::json& pod = worker.at("template").at("spec");
  const nlohmann::json& mount = pod.at("containers").at(0).at("volumeMounts").at(0);
  const nlohmann::json& secret = pod.at("volumes").at(0).at("secret");
  EXPECT_EQ(after("--secret_file"), mount.at("mountPath").get<std::string>() + "/" +
                                        secret.at("items").at(0).at("path").get<std::string>());
  EXPECT_EQ(secret.at("defaultMode"), 0400);
}

// Three hosts of their own (network namespaces), each rank given only RANK, WORLD_SIZE and
// MASTER_ADDR: the default port, and each rank's address the one it reaches rank 0 from.
std::vector<ProcessResult> run_on_three_hosts(const VirtualNetwork& net,
                                              const std::vector<std::string>& flags) {
  std::vector<std::unique_ptr<DtrainProcess>> ranks;
  for (int r = 0; r < 3; ++r) {
    DtrainProcess::Options options;
    options.prefix = net.run_on(r);
    options.extra_env = {fmt::format("RANK={}", r), "WORLD_SIZE=3", "MASTER_ADDR=" + net.address(0),
                         fmt::format("DTRAIN_SECRET={}", kLauncherSecret)};
    ranks.push_back(std::make_unique<DtrainProcess>(flags, options));
  }
  std::vector<ProcessResult> results;
  for (auto& rank : ranks) results.push_back(rank->wait());
  return results;
}

TEST(Launchers, ThreeRanksOnThreeHostsMeetGivenOnlyRankWorldSizeAndMasterAddr) {
  if (const auto why = VirtualNetwork::unavailable()) GTEST_SKIP() << *why;
  const VirtualNetwork net(3);
  const std::vector<ProcessResult> ring = run_on_three_hosts(net, task_flags());
  std::vector<std::string> checksums;
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(ring[r].exit_code, 0) << all_output(ring[r]);
    EXPECT_THAT(ring[r].out, HasSubstr(fmt::format("rank {} is worker:{} of worker=[{}:", r, r,
                                                   net.address(0))));
    EXPECT_THAT(ring[r].out, HasSubstr(fmt::format("rendezvous at {}:29500", net.address(0))));
    const std::vector<double> accuracy = accuracies_in(ring[r].out);
    ASSERT_FALSE(accuracy.empty()) << ring[r].out;
    EXPECT_GE(accuracy.back(), 0.90) << ring[r].out;
    const std::vector<std::string> crc = checksums_in(ring[r].out);
    ASSERT_EQ(crc.size(), 1u) << ring[r].out;
    checksums.push_back(crc[0]);
  }
  EXPECT_EQ(checksums[0], checksums[1]);
  EXPECT_EQ(checksums[1], checksums[2]);
  // Each rank registered the address of its own host.
  for (int r = 1; r < 3; ++r) EXPECT_THAT(ring[0].out, HasSubstr(net.address(r) + ":"));

  const std::vector<ProcessResult> ps =
      run_on_three_hosts(net, concat(task_flags(), {"--ps", "1"}));
  for (const ProcessResult& r : ps) ASSERT_EQ(r.exit_code, 0) << all_output(r);
  EXPECT_THAT(ps[0].out, HasSubstr(fmt::format("rank 0 is ps:0 of ps=[{}:", net.address(0))));
  for (int w : {1, 2}) {
    const std::vector<double> accuracy = accuracies_in(ps[w].out);
    ASSERT_FALSE(accuracy.empty()) << ps[w].out;
    EXPECT_GE(accuracy.back(), 0.90) << ps[w].out;
  }
}

// The rendezvous's failures, with real processes: each rank ends with the one error.
TEST(Launchers, AMissingRankEndsTheOthersNamingIt) {
  std::vector<std::unique_ptr<DtrainProcess>> ranks;
  const uint16_t port = pick_free_ports(1)[0];
  for (int r : {0, 1}) {
    DtrainProcess::Options options;
    options.extra_env = loopback_rank_env(r, 3, port);
    ranks.push_back(
        std::make_unique<DtrainProcess>(concat(task_flags(), {"--peer_timeout", "2"}), options));
  }
  for (auto& rank : ranks) {
    const ProcessResult r = rank->wait();
    EXPECT_EQ(r.exit_code, 1) << all_output(r);
    EXPECT_THAT(r.err, HasSubstr("rank(s) 2 did not register within 2 s (--peer_timeout)"))
        << all_output(r);
  }
}

TEST(Launchers, ARankWithAnotherSecretFailsItsHandshakeAndTheOthersNameItMissing) {
  std::vector<std::unique_ptr<DtrainProcess>> ranks;
  const uint16_t port = pick_free_ports(1)[0];
  for (int r : {0, 1}) {
    DtrainProcess::Options options;
    options.extra_env =
        loopback_rank_env(r, 2, port, r == 0 ? kLauncherSecret : "another secret, 32 bytes long");
    ranks.push_back(
        std::make_unique<DtrainProcess>(concat(task_flags(), {"--peer_timeout", "3"}), options));
  }
  const ProcessResult zero = ranks[0]->wait();
  const ProcessResult stranger = ranks[1]->wait();
  EXPECT_EQ(zero.exit_code, 1) << all_output(zero);
  EXPECT_THAT(zero.err, HasSubstr("rank(s) 1 did not register within 3 s"));
  EXPECT_THAT(zero.err, HasSubstr("meanwhile 1 connection(s) rejected (1 failed authentication)"));
  EXPECT_EQ(stranger.exit_code, 1) << all_output(stranger);
  EXPECT_THAT(stranger.err, HasSubstr("the rendezvous (MASTER_ADDR and MASTER_PORT)"));
}

// Connections without the secret, opened against 127.0.0.1:port as fast as four threads can, the
// newest 64 of each kept open and saying nothing, until destroyed: far more than a server keeps
// authenticating at once (32), so it sheds the oldest handshakes, a real rank's among them.
class ConnectionFlood {
 public:
  explicit ConnectionFlood(uint16_t port) {
    for (int i = 0; i < 4; ++i)
      threads_.emplace_back([this, port](std::stop_token stop) { flood(port, stop); });
  }
  int opened() const { return opened_; }

 private:
  void flood(uint16_t port, const std::stop_token& stop) {
    std::deque<int> open;
    while (!stop.stop_requested()) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_port = htons(port);
      address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0) {
        ++opened_;
        open.push_back(fd);
      } else {
        ::close(fd);
        // The rendezvous is over and its port closed: pacing, not synchronising with anything.
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      while (open.size() > 64) {
        ::close(open.front());
        open.pop_front();
      }
    }
    for (int fd : open) ::close(fd);
  }

  std::atomic<int> opened_ = 0;
  std::vector<std::jthread> threads_;  // last: they use opened_
};

// Rank 1 meets rank 0 while the rendezvous port is flooded: its handshake may be shed, and is then
// tried again within --peer_timeout; rank 0 logs a few rejections and sums up the rest.
TEST(Launchers, ARankJoiningUnderAConnectionFloodOfTheRendezvousStillJoinsAndTrains) {
  const uint16_t port = pick_free_ports(1)[0];
  const std::vector<std::string> flags = concat(task_flags(), {"--peer_timeout", "60"});
  DtrainProcess::Options zero_options;
  zero_options.extra_env = loopback_rank_env(0, 2, port);
  DtrainProcess zero(flags, zero_options);
  ASSERT_THAT(zero.wait_for_line("rendezvous at"), HasSubstr("127.0.0.1"));
  ProcessResult one;
  int opened = 0;
  {
    ConnectionFlood flood(port);
    DtrainProcess::Options one_options;
    one_options.extra_env = loopback_rank_env(1, 2, port);
    one = DtrainProcess(flags, one_options).wait();
    opened = flood.opened();
  }
  const ProcessResult zero_result = zero.wait();
  ASSERT_EQ(one.exit_code, 0) << all_output(one);
  ASSERT_EQ(zero_result.exit_code, 0) << all_output(zero_result);
  EXPECT_GE(opened, 100);
  for (const ProcessResult* r : {&zero_result, static_cast<const ProcessResult*>(&one)}) {
    const std::vector<double> accuracy = accuracies_in(r->out);
    ASSERT_FALSE(accuracy.empty()) << all_output(*r);
    EXPECT_GE(accuracy.back(), 0.90) << all_output(*r);
  }
  // A handful of warnings a window, and the rest summed up by kind.
  const std::string log = all_output(zero_result);
  EXPECT_LE(all_matches(log, "dropped the connection from|rejected connection:").size(), 60u)
      << log.size() << " bytes of output";
  EXPECT_THAT(log, HasSubstr("not logged one by one ("));
  EXPECT_THAT(log, HasSubstr("dropped while authenticating under load"));
}

}  // namespace
}  // namespace dtrain::testing
