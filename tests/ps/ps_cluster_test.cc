// Parameter-server training end to end: real dtrain processes (the local launcher, or ps and
// worker tasks started one by one) over loopback. Sync training ends with the same parameters to
// the bit whether payloads move over TCP, through memory, or some each way; backup workers leave a
// straggler behind, a ps survives hostile connections while training goes on, Ctrl-C stops every
// task, and bad secrets, cluster flags or --transport shm against a tcp peer fail cleanly. (That
// sync training is local training on the combined batch is tests/train/ps_strategy_test.cc's.)
#include "support/ps_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "ckpt/checkpoint_manager.h"
#include "comm/connect.h"
#include "comm/connection.h"
#include "comm/frame.h"
#include "comm/tcp_stream.h"
#include "nn/model_zoo.h"
#include "nn/param_set.h"
#include "ps/partition.h"
#include "ps/ps_protocol.h"
#include "support/checkpoints.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "support/text_match.h"
#include "support/virtual_network.h"

namespace dtrain {
namespace {

using testing::all_output;
using testing::concat;
using testing::DtrainProcess;
using testing::HandStartedCluster;
using ::testing::HasSubstr;
using testing::kSecret;
using testing::local_steps_of;
using testing::newest_checkpoint;
using testing::numbers_in;
using testing::ProcessResult;
using testing::ps_summary;
using testing::run_dtrain;
using testing::secret_env;
using testing::softmax_flags;
using testing::with_flag;

// ---- 1b. payloads through memory ----

// Sync with two workers is exact arithmetic whatever the order the gradients arrive in (a + b is
// b + a), so the same run over TCP, through memory and in a cluster where some connections go
// each way must end with the same parameters, to the bit: a value written into a worker's memory
// late, at the wrong offset or not at all, or a gradient read from the wrong place, shows. Two ps
// tasks, so that the mlp's shards are spread and a pull writes pieces into each worker's arena.
// Through memory each push offers the worker's place for the values that come back, and the ps
// writes them there: a reply that could not (its meta grown too large for a mailbox record) left
// one landing unused a shard a step, and after 4096 of them the ps dropped the connection. More
// steps than that, two shards: not one connection lost.
TEST(PsCluster, ValuesThroughMemoryLandWhereTheWorkerOfferedThemStepAfterStep) {
  const ProcessResult r =
      run_dtrain(concat({"train", "--strategy", "sync", "--workers", "2", "--transport", "shm"},
                        concat(softmax_flags(), {"--train_steps", "2600"})));
  ASSERT_EQ(r.exit_code, 0) << all_output(r);
  EXPECT_THAT(all_output(r), ::testing::Not(HasSubstr("landings unused")));
  EXPECT_THAT(all_output(r), ::testing::Not(HasSubstr("lost ps0")));
  EXPECT_THAT(r.out, HasSubstr("ps0: serving 2 shards"));
  EXPECT_THAT(r.out, HasSubstr("ps0: done at global step 2600:"));
}

TEST(PsCluster, PayloadsThroughMemoryTrainBitForBitAsOverTcp) {
  const std::vector<std::string> common =
      concat(with_flag(softmax_flags(), "--model", "mlp"), {"--train_steps", "60"});
  std::map<std::string, std::string> crc;  // transport -> the one CRC of every worker
  for (const std::string transport : {"tcp", "shm"}) {
    const ProcessResult r =
        run_dtrain(concat({"train", "--strategy", "sync", "--ps", "2", "--workers", "2"},
                          concat(common, {"--transport", transport, "--tcp_congestion", "reno"})));
    ASSERT_EQ(r.exit_code, 0) << all_output(r);
    const std::map<int, std::string> crcs = testing::parameter_crcs(r.out);
    ASSERT_EQ(crcs.size(), 2u) << r.out;
    EXPECT_EQ(crcs.at(0), crcs.at(1)) << r.out;
    crc[transport] = crcs.at(0);
    const std::string line =
        transport == "tcp"
            ? ": transport to ps0: tcp (congestion control reno); ps1: tcp (congestion control "
              "reno)"
            : ": transport to ps0: shm; ps1: shm (shm: the ps copies the gradients out of this "
              "worker's memory and the values into it)";
    EXPECT_EQ(testing::count_lines_containing(r.out, line), 2) << r.out;
  }
  EXPECT_EQ(crc["tcp"], crc["shm"]);

  // Mixed, each task's own --transport: ps0 tcp, ps1 auto; worker0 auto, worker1 tcp. Worker 0
  // reaches ps1 through memory and ps0 over TCP, saying why; worker 1 reaches both over TCP.
  HandStartedCluster cluster(2, 2);
  const std::vector<std::string> flags =
      concat(common, {"--sync_replicas", "--replicas_to_aggregate", "2", "--peer_timeout", "60",
                      "--tcp_congestion", "reno"});
  auto with_transport = [&](const char* transport) {
    return concat(flags, {"--transport", transport});
  };
  const auto ps0 = cluster.start("ps", 0, with_transport("tcp"));
  const auto ps1 = cluster.start("ps", 1, with_transport("auto"));
  const auto worker0 = cluster.start("worker", 0, with_transport("auto"));
  const auto worker1 = cluster.start("worker", 1, with_transport("tcp"));
  const ProcessResult w0 = worker0->wait(), w1 = worker1->wait();
  ASSERT_EQ(w0.exit_code, 0) << all_output(w0);
  ASSERT_EQ(w1.exit_code, 0) << all_output(w1);
  for (const auto* ps : {&ps0, &ps1}) {
    const ProcessResult r = (*ps)->wait();
    EXPECT_EQ(r.exit_code, 0) << all_output(r);
  }
  EXPECT_THAT(w0.out, HasSubstr("worker=0: transport to ps0: tcp (ps0 was started with "
                                "--transport tcp; congestion control reno); ps1: shm (shm: "));
  EXPECT_THAT(w1.out, HasSubstr("worker=1: transport to ps0: tcp (congestion control reno); ps1: "
                                "tcp (congestion control reno)\n"));
  for (const ProcessResult* w : {&w0, &w1}) {
    const std::map<int, std::string> crcs = testing::parameter_crcs(w->out);
    ASSERT_EQ(crcs.size(), 1u) << w->out;
    EXPECT_EQ(crcs.begin()->second, crc["tcp"]) << w->out;
  }
}

// --transport shm meets a peer started with --transport tcp: the worker stops with one error
// naming the flag and both tasks, whichever side asked for shm.
TEST(PsCluster, ShmAgainstATcpPeerIsRefusedNamingTheFlagAndBothTasks) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"tcp",
       "--transport shm: worker0 and ps0 cannot move payloads through memory: ps0 was started "
       "with --transport tcp; run them with --transport tcp or auto"},
      {"shm",
       "--transport shm: ps0 and worker0 cannot move payloads through memory: worker0 was "
       "started with --transport tcp; run them with --transport tcp or auto"},
  };
  for (const auto& [ps_transport, refusal] : cases) {
    HandStartedCluster cluster(1, 1);
    const std::vector<std::string> flags =
        concat(softmax_flags(), {"--train_steps", "10", "--peer_timeout", "30"});
    const auto ps = cluster.start("ps", 0, concat(flags, {"--transport", ps_transport}));
    const ProcessResult worker =
        cluster
            .start("worker", 0,
                   concat(flags, {"--transport", ps_transport == "tcp" ? "shm" : "tcp"}))
            ->wait();
    EXPECT_EQ(worker.exit_code, 1) << all_output(worker);
    EXPECT_EQ(testing::count_lines_containing(worker.err, "dtrain: error:"), 1) << worker.err;
    EXPECT_THAT(worker.err, HasSubstr(refusal));
    // The ps waits for a worker that will agree with it: it ends only by the signal.
    ps->send_signal(SIGTERM);
    const ProcessResult ps_result = ps->wait();
    EXPECT_EQ(ps_result.exit_code, 128 + SIGTERM) << all_output(ps_result);
    if (ps_transport == "shm") {
      EXPECT_THAT(all_output(ps_result), HasSubstr(refusal));
    }
  }
}

// A worker lets other processes of its user read its memory (it lifts Yama's ptrace restriction,
// which only processes of its own host could use) for a ps on its host that reads it: once,
// however many such ps tasks, and never when every ps is on another host.
constexpr std::string_view kLiftLine = "peer memory: a task on this host reads this one's memory";

std::vector<std::string> lift_test_flags() {
  return concat(softmax_flags(), {"--train_steps", "20", "--peer_timeout", "60"});
}

TEST(PsCluster, AWorkerLetsItsMemoryBeReadOnceForTheTasksOfItsHostThatReadIt) {
  HandStartedCluster cluster(2, 1);
  const auto ps0 = cluster.start("ps", 0, lift_test_flags());
  const auto ps1 = cluster.start("ps", 1, lift_test_flags());
  const ProcessResult worker = cluster.start("worker", 0, lift_test_flags())->wait();
  ASSERT_EQ(worker.exit_code, 0) << all_output(worker);
  EXPECT_THAT(worker.out, HasSubstr("worker=0: transport to ps0: shm; ps1: shm"));
  EXPECT_EQ(testing::count_lines_containing(worker.out, std::string(kLiftLine)), 1) << worker.out;
  for (const auto* ps : {&ps0, &ps1}) {
    const ProcessResult r = (*ps)->wait();
    EXPECT_EQ(r.exit_code, 0) << all_output(r);
  }
}

TEST(PsCluster, AWorkerWhosePsIsOnAnotherHostKeepsItsMemoryToItself) {
  if (const auto why = testing::VirtualNetwork::unavailable()) GTEST_SKIP() << *why;
  const testing::VirtualNetwork network(2);
  const HandStartedCluster cluster(1, 1, network);
  const auto ps = cluster.start("ps", 0, lift_test_flags());
  const ProcessResult worker = cluster.start("worker", 0, lift_test_flags())->wait();
  ASSERT_EQ(worker.exit_code, 0) << all_output(worker);
  EXPECT_EQ(testing::count_lines_containing(worker.out, std::string(kLiftLine)), 0) << worker.out;
  const ProcessResult r = ps->wait();
  EXPECT_EQ(r.exit_code, 0) << all_output(r);
}

// ---- 2. backup workers ----

TEST(PsCluster, BackupWorkersLeaveTheStragglerBehindAndItsGradientsAreDroppedAsStale) {
  constexpr int kSteps = 300;
  HandStartedCluster cluster(1, 3);
  const std::vector<std::string> flags =
      concat(softmax_flags(), {"--sync_replicas", "--replicas_to_aggregate", "2", "--train_steps",
                               std::to_string(kSteps), "--peer_timeout", "60"});
  const auto ps = cluster.start("ps", 0, flags);
  // Worker 2 is the straggler (not the chief, which initialises the variables). A fixed delay
  // makes no straggler on a loaded machine, where the others may be slower still; a stopped
  // process is one on any machine. It logs every step, takes part in the first, and is then
  // stopped (SIGSTOP) until the two others have finished every step without it.
  std::vector<std::string> straggler_flags = flags;
  straggler_flags[std::find(flags.begin(), flags.end(), "--log_every") - flags.begin() + 1] = "1";
  std::vector<std::unique_ptr<DtrainProcess>> workers(3);
  workers[2] = cluster.start("worker", 2, straggler_flags);
  // It has loaded its data (it prints its configuration after that) before the others start, so
  // that it takes part in the first steps on any machine.
  ASSERT_THAT(workers[2]->wait_for_line("worker2: sync training"), HasSubstr("worker2"));
  workers[0] = cluster.start("worker", 0, flags);
  workers[1] = cluster.start("worker", 1, flags);
  ASSERT_THAT(workers[2]->wait_for_line("local_step=1,"), HasSubstr("worker=2"));
  workers[2]->send_signal(SIGSTOP);

  // The fast two finish alone: were they waiting for the straggler, wait() would run out of
  // patience and kill them, failing here.
  std::vector<ProcessResult> results;
  results.push_back(workers[0]->wait());
  results.push_back(workers[1]->wait());
  for (size_t i = 0; i < results.size(); ++i)
    ASSERT_EQ(results[i].exit_code, 0) << "worker " << i << ": " << all_output(results[i]);
  // Woken, the straggler pushes a gradient of a step long past, which is dropped; then it sees
  // that training is over and ends too.
  workers[2]->send_signal(SIGCONT);
  results.push_back(workers[2]->wait());
  ASSERT_EQ(results[2].exit_code, 0) << "worker 2: " << all_output(results[2]);
  const ProcessResult ps_result = ps->wait();
  ASSERT_EQ(ps_result.exit_code, 0) << all_output(ps_result);

  const auto summary = ps_summary(ps_result.out);
  ASSERT_TRUE(summary) << all_output(ps_result);
  EXPECT_EQ(summary->step, kSteps);
  EXPECT_GT(summary->stale, 0) << all_output(ps_result);
  const auto stale_rounds = numbers_in(
      results[2].out, R"(worker=2: training elapsed time: .*; ([0-9]+) rounds with a stale)");
  ASSERT_TRUE(stale_rounds) << all_output(results[2]);
  EXPECT_GE((*stale_rounds)[0], 1) << all_output(results[2]);
  // The chief reports the count as of its own end, which is before the straggler's last push.
  const auto aggregate = numbers_in(
      results[0].out, R"(ps tasks dropped ([0-9]+) stale gradients and [0-9]+ duplicate)");
  ASSERT_TRUE(aggregate) << all_output(results[0]);
  EXPECT_LE((*aggregate)[0], summary->stale);

  const int64_t fast0 = local_steps_of(0, results[0].out);
  const int64_t fast1 = local_steps_of(1, results[1].out);
  const int64_t slow = local_steps_of(2, results[2].out);
  ASSERT_GE(fast0, 0) << all_output(results[0]);
  ASSERT_GE(fast1, 0) << all_output(results[1]);
  ASSERT_GE(slow, 2) << all_output(results[2]);
  // Every step took two distinct workers' gradients, and the straggler's fresh ones are those
  // it pushed before it stopped (its last was stale).
  EXPECT_GE(fast0 + fast1 + (slow - 1), 2 * kSteps);
  EXPECT_LT(slow, kSteps / 2) << all_output(results[2]);
}

// ---- 3. a ps under attack keeps serving ----

// A connection to the ps opened by hand, so that the test knows its own address (the name the
// ps's warnings give it). Two views of the one socket: a Connection for a genuine handshake, and
// a raw stream that can then write anything at all.
class HandmadePeer {
 public:
  explicit HandmadePeer(uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error("socket failed");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    socklen_t length = sizeof address;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ::close(fd);
      throw std::runtime_error(std::string("connect to the ps failed: ") + std::strerror(errno));
    }
    fd_ = fd;
    ps_address_ = fmt::format("127.0.0.1:{}", port);
    local_address_ = fmt::format("127.0.0.1:{}", ntohs(address.sin_port));
    raw_ = std::make_unique<TcpStream>(fd, ps_address_);
  }

  // "127.0.0.1:<our port>": how the ps names this connection.
  const std::string& local_address() const { return local_address_; }

  void authenticate(std::string_view secret) {
    // Close-on-exec, like every descriptor here: the tasks the test starts later must not
    // inherit it.
    const int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error("dup failed");
    ConnectionOptions options;
    options.task_name = "ps0";
    connection_ =
        std::make_unique<Connection>(std::make_unique<TcpStream>(fd, ps_address_), options);
    connection_->handshake_as_client(secret);
  }

  void write(std::span<const std::byte> bytes) {
    const std::span<const std::byte> pieces[] = {bytes};
    raw_->write_all(pieces, deadline());
  }

  // Whether the ps closes the connection (end of stream, or a reset) within the patience.
  bool closed_by_other_side() {
    std::byte sink[4096];
    try {
      while (raw_->read_some(sink, deadline()) > 0) {
      }
      return true;
    } catch (const TransportError& error) {
      return std::string(error.what()).find("timed out") == std::string::npos;
    }
  }

 private:
  static IoDeadline deadline() {
    // Bounds a wait that a broken ps would otherwise make endless; not a performance limit.
    return {.until = SteadyClock::now() + std::chrono::seconds(30)};
  }

  std::string ps_address_, local_address_;
  int fd_ = -1;  // owned by raw_
  std::unique_ptr<TcpStream> raw_;
  std::unique_ptr<Connection> connection_;  // after raw_: closed first
};

// A push of a gradient for shard 0 whose bytes were damaged after the CRC was computed.
std::vector<std::byte> push_with_bad_crc() {
  ModelConfig softmax;
  softmax.name = "softmax";
  const auto model = make_model(softmax);
  const ParamSet layout(model->param_specs());
  // The map the ps task builds (PsClusterConfig's defaults), so the frame is the right size.
  const PartitionMap map = make_partition(layout, 1, Placement::kBalanced, 64 * 1024, 1 << 20);
  const std::vector<float> gradient(map.shards[0].size(), 1.0f);
  ps_protocol::MetaWriter meta;
  ps_protocol::write(meta, ps_protocol::PushMeta{.shard = 0,
                                                 .worker = 0,
                                                 .sequence = 0,
                                                 .computed_at_step = 0,
                                                 .lr = 0.5f,
                                                 .want_values = 1});
  const std::span<const float> tensors[] = {gradient};
  std::vector<std::byte> frame = encode_frame(ps_protocol::kPush, 1, meta.bytes(), tensors);
  frame.back() ^= std::byte{0x40};  // a bit of the last float flipped in transit
  // What a relay without the secret can put where the frame's tag goes.
  frame.resize(frame.size() + kFrameTagBytes);
  return frame;
}

// The header of a push announcing a payload above the ps's limit (1 GiB, ConnectionOptions).
std::vector<std::byte> header_announcing_too_much() {
  FrameHeader header;
  header.type = ps_protocol::kPush;
  header.request_id = 2;
  header.payload_len = uint64_t{1} << 40;
  std::vector<std::byte> bytes(frame_format::kHeaderBytes);
  encode_header(header, std::span(bytes).first<frame_format::kHeaderBytes>());
  return bytes;
}

// The lines of text that contain every one of needles.
int lines_with_all(const std::string& text, const std::vector<std::string>& needles) {
  std::istringstream in(text);
  int count = 0;
  for (std::string line; std::getline(in, line);) {
    count += std::all_of(needles.begin(), needles.end(),
                         [&](const std::string& n) { return line.find(n) != std::string::npos; });
  }
  return count;
}

TEST(PsCluster, PsRejectsHostileConnectionsAndTrainingStillCompletes) {
  HandStartedCluster cluster(1, 2);
  const std::vector<std::string> flags = concat(softmax_flags(), {"--train_steps", "200"});
  // The ps first, alone: the workers start once the attacks are over, so every attack meets a ps
  // that is waiting for its workers (it exits only once they report done).
  const auto ps = cluster.start("ps", 0, flags);
  const uint16_t port = cluster.ps_port(0);

  // (a) The wrong secret. connect() retries until the ps listens.
  ConnectionOptions options;
  options.task_name = "ps0";
  options.connect_timeout_ms = 60'000;
  EXPECT_THROW(dtrain::connect("127.0.0.1", port, "not the cluster secret", options), AuthError);

  // (b) Garbage before authenticating: an HTTP request, longer than a frame header.
  HandmadePeer garbage(port);
  const std::string http = "GET / HTTP/1.1\r\nHost: ps0\r\n\r\n";
  garbage.write(std::as_bytes(std::span(http)));
  EXPECT_TRUE(garbage.closed_by_other_side());

  // (c) Authenticated, then a gradient altered after it was tagged (its CRC recomputed).
  HandmadePeer bad_crc(port);
  bad_crc.authenticate(kSecret);
  bad_crc.write(push_with_bad_crc());
  EXPECT_TRUE(bad_crc.closed_by_other_side());

  // (d) Authenticated, then a header announcing a terabyte.
  HandmadePeer too_long(port);
  too_long.authenticate(kSecret);
  too_long.write(header_announcing_too_much());
  EXPECT_TRUE(too_long.closed_by_other_side());

  const auto worker0 = cluster.start("worker", 0, flags);
  const auto worker1 = cluster.start("worker", 1, flags);
  const ProcessResult w0 = worker0->wait(), w1 = worker1->wait();
  const ProcessResult ps_result = ps->wait();
  ASSERT_EQ(w0.exit_code, 0) << all_output(w0);
  ASSERT_EQ(w1.exit_code, 0) << all_output(w1);
  ASSERT_EQ(ps_result.exit_code, 0) << all_output(ps_result);
  EXPECT_EQ(testing::count_lines_containing(w0.out, "worker=0: test accuracy = 0."), 1) << w0.out;
  EXPECT_EQ(testing::count_lines_containing(w1.out, "worker=1: test accuracy = 0."), 1) << w1.out;

  // Each attack was refused for its own reason, (b) to (d) named by their address. A connection's
  // thread logs its warning before it counts the connection, and the ps joins every such thread
  // before it prints its summary, so all four lines are there.
  const std::string ps_log = ps_result.out + ps_result.err;
  EXPECT_EQ(lines_with_all(ps_log, {"rejected connection", "failed authentication"}), 1) << ps_log;
  EXPECT_EQ(lines_with_all(ps_log, {"rejected connection", garbage.local_address(), "bad magic"}),
            1)
      << ps_log;
  EXPECT_EQ(lines_with_all(ps_log,
                           {"closed connection", bad_crc.local_address(), "failed authentication"}),
            1)
      << ps_log;
  EXPECT_EQ(lines_with_all(ps_log, {"closed connection", too_long.local_address(), "over the"}), 1)
      << ps_log;
  const auto summary = ps_summary(ps_result.out);
  ASSERT_TRUE(summary) << ps_log;
  EXPECT_GE(summary->step, 200);
  // (a) and (b) failed the handshake; (c) and (d) broke the format after it. The workers' own
  // connections ended normally.
  EXPECT_EQ(summary->rejected, 2);
  EXPECT_EQ(summary->failed, 2);
}

// ---- 4. Ctrl-C ----

std::vector<pid_t> children_of(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/task/{}/children", pid, pid));
  std::vector<pid_t> children;
  for (pid_t child; in >> child;) children.push_back(child);
  return children;
}

TEST(PsCluster, SigintStopsEveryTask) {
  DtrainProcess launcher(
      {"train", "--strategy", "async", "--ps", "1", "--workers", "2", "--model", "mnist_inference",
       "--log_every", "10", "--threads", "1", "--data_dir", testing::mnist_dir().string()},
      {.extra_env = {}, .own_process_group = true, .prefix = {}, .program = {}});
  // A step line proves the cluster is up: ps, chief and workers all running.
  ASSERT_THAT(launcher.wait_for_line("global_step="), HasSubstr("global_step="));
  // Read before the interrupt: the launcher spawned all three before relaying any output.
  const std::vector<pid_t> tasks = children_of(launcher.pid());
  ASSERT_EQ(tasks.size(), 3u);
  for (pid_t task : tasks) ASSERT_EQ(::kill(task, 0), 0) << "task " << task << " is running";

  launcher.send_signal(SIGINT);
  const ProcessResult result = launcher.wait();
  EXPECT_EQ(result.exit_code, 128 + SIGINT) << all_output(result);
  EXPECT_THAT(result.err, HasSubstr("interrupted"));
  // The launcher reaped them all before it exited: not even zombies are left.
  for (pid_t task : tasks) {
    errno = 0;
    EXPECT_EQ(::kill(task, 0), -1) << "task " << task << " outlived the launcher";
    EXPECT_EQ(errno, ESRCH) << "task " << task;
  }
}

// ---- 5. and 6. clean failures ----

TEST(PsCluster, WorkerWithTheWrongSecretFailsNamingAuthentication) {
  HandStartedCluster cluster(1, 1);
  const std::vector<std::string> flags =
      concat(softmax_flags(), {"--train_steps", "10", "--peer_timeout", "30"});
  const auto ps = cluster.start("ps", 0, flags, "the ps task's secret X");
  const ProcessResult worker = cluster.start("worker", 0, flags, "the worker's secret Y")->wait();
  EXPECT_EQ(worker.exit_code, 1) << all_output(worker);
  EXPECT_EQ(testing::count_lines_containing(worker.err, "dtrain: error:"), 1) << worker.err;
  EXPECT_THAT(worker.err, HasSubstr("failed authentication (wrong cluster secret)"));

  // The ps still waits for its worker: it ends only by the signal, in order.
  ps->send_signal(SIGTERM);
  const ProcessResult ps_result = ps->wait();
  EXPECT_EQ(ps_result.exit_code, 128 + SIGTERM) << all_output(ps_result);
  EXPECT_THAT(ps_result.out, HasSubstr("ps0: stopped by SIGTERM"));
}

}  // namespace
}  // namespace dtrain
