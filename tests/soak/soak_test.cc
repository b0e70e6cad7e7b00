// The soak test: 2 ps tasks and 16 workers train on loopback for DTRAIN_SOAK_SECONDS (20 by
// default; 600 for the run by hand) while a hostile client opens and drops connections to the ps
// tasks. It checks that nothing deadlocks, every worker finishes, every task's resident memory
// stays flat after warm-up and no ps leaks a descriptor, and prints the figures that
// docs/testing.md quotes. It is not a performance test: the workers' steps are paced.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/error.h"
#include "comm/auth.h"
#include "comm/connection.h"
#include "comm/frame.h"
#include "comm/tcp_stream.h"
#include "data/idx.h"
#include "support/proc_stats.h"
#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/temp_dir.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using testing::DtrainProcess;
using testing::ProcessResult;

constexpr int kPs = 2;
constexpr int kWorkers = 16;
constexpr std::chrono::seconds kDefaultDuration{20};
// Each worker sleeps this long before every step, so the cluster makes at most
// kWorkers * 1000 / kStepDelayMs global steps a second however fast the machine is: a run of
// duration * that many steps lasts at least the duration, and leaves most of the two cores to
// the tests that run beside it.
constexpr int kStepDelayMs = 100;
// Hostile connections per second, to the two ps tasks together.
constexpr int kGarbagePerSecond = 50;
// The warm-up, counted from when every worker trains: a quarter of the run, at most a minute
// (the bound of the 10-minute run by hand).
constexpr std::chrono::seconds kLongestWarmUp{60};
// After warm-up no task may grow by more than this fraction of its RSS then...
constexpr double kRssGrowth = 0.05;
// ...plus, in runs shorter than four minutes, this. A short run's warm-up (5 s by default) may end
// before the ps tasks' connection threads have touched every malloc arena they will use: glibc
// gives new threads up to 8 arenas per core, each keeping what was freed into it, so that growth
// happens once, whenever the machine's load puts it, however long the run. 5% of a ps is about
// 0.7 MiB; a few arenas' first chunks fill it. Measured growth after warm-up: 260 KiB in a 10 s
// run (2 s of warm-up), 40 KiB in a 20 s run, 12 KiB in a 120 s run. A leak grows with the run
// instead: 1 KiB per hostile connection is about 13 MiB per ps after the 10-minute run's whole
// minute of warm-up, and that run has no slack.
constexpr int64_t kShortRunRssSlackBytes = 1 << 20;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// DTRAIN_SOAK_SECONDS, or the short default of the suite.
std::chrono::seconds soak_duration() {
  const char* text = std::getenv("DTRAIN_SOAK_SECONDS");
  if (text == nullptr || *text == '\0') return kDefaultDuration;
  int seconds = 0;
  const char* end = text + std::strlen(text);
  const auto [rest, error] = std::from_chars(text, end, seconds);
  if (error != std::errc() || rest != end || seconds < 8) {
    throw std::invalid_argument(fmt::format(
        "DTRAIN_SOAK_SECONDS={}: expected a whole number of seconds, at least 8", text));
  }
  return std::chrono::seconds(seconds);
}

// ---- data ----

// The first `count` examples of an MNIST file, written to `to` as raw IDX.
void write_first_examples(const std::filesystem::path& from, const std::filesystem::path& to,
                          uint32_t count) {
  const IdxArray array = read_idx(from);
  if (count > array.dims[0]) throw std::invalid_argument(from.string() + " is too small");
  std::string bytes = {0, 0, 0x08, static_cast<char>(array.dims.size())};
  for (size_t i = 0; i < array.dims.size(); ++i) {
    const uint32_t dim = i == 0 ? count : array.dims[i];
    for (int shift = 24; shift >= 0; shift -= 8) bytes += static_cast<char>(dim >> shift);
  }
  const size_t example_bytes = array.data.size() / array.dims[0];
  bytes.append(reinterpret_cast<const char*>(array.data.data()), count * example_bytes);
  testing::write_bytes(to, bytes);
}

// A small MNIST: every worker holds the whole data set as float32, and sixteen copies of the real
// one would take 3.5 GiB and most of a short run's time to load. 6000 training examples (1000 of
// them held out for validation, --validation_size below) and 1000 test examples.
void write_small_mnist(const std::filesystem::path& dir) {
  const auto source = testing::mnist_dir();
  write_first_examples(source / "train-images-idx3-ubyte", dir / "train-images-idx3-ubyte", 6000);
  write_first_examples(source / "train-labels-idx1-ubyte", dir / "train-labels-idx1-ubyte", 6000);
  write_first_examples(source / "t10k-images-idx3-ubyte", dir / "t10k-images-idx3-ubyte", 1000);
  write_first_examples(source / "t10k-labels-idx1-ubyte", dir / "t10k-labels-idx1-ubyte", 1000);
}

// ---- hostile connections ----

// Bounds a wait that a broken ps would otherwise make endless; not a performance limit.
IoDeadline patient_deadline() { return {.until = Clock::now() + 30s}; }

// One connection to a ps opened by hand, so that anything at all can be written on it.
class RawPeer {
 public:
  explicit RawPeer(uint16_t port) : address_(fmt::format("127.0.0.1:{}", port)) {
    // Close-on-exec, like every descriptor here: the tasks must not inherit it.
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error("socket failed");
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(port);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
      const std::string reason = std::strerror(errno);
      ::close(fd);
      throw std::runtime_error(fmt::format("connect to {} failed: {}", address_, reason));
    }
    fd_ = fd;
    stream_ = std::make_unique<TcpStream>(fd, address_);
  }

  void write(std::span<const std::byte> bytes) {
    const std::span<const std::byte> pieces[] = {bytes};
    stream_->write_all(pieces, patient_deadline());
  }

  // The first half of the handshake (comm/auth.h): our HELLO, and the ps's CHALLENGE read in full.
  // Once the challenge has come, the ps has accepted us and its handshake thread serves us.
  void say_hello() {
    const Nonce nonce = random_nonce();
    const auto params = encode_params(HandshakeParams{});
    std::vector<std::byte> hello(nonce.begin(), nonce.end());
    hello.insert(hello.end(), params.begin(), params.end());
    write(encode_frame(frame_format::kTypeHello, 0, hello, {}));
    std::array<std::byte, frame_format::kHeaderBytes> header;
    stream_->read_exact(header, patient_deadline());
    std::vector<std::byte> payload(decode_header(header, 1024).payload_len);
    stream_->read_exact(payload, patient_deadline());
  }

  // The whole handshake, through a Connection over a second descriptor of the same socket.
  void authenticate(std::string_view secret) {
    const int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error("dup failed");
    ConnectionOptions options;
    options.task_name = "ps";
    connection_ = std::make_unique<Connection>(std::make_unique<TcpStream>(fd, address_), options);
    connection_->handshake_as_client(secret);
  }

  // Half-closes our side, so that the ps reads the end of the stream wherever it is, then waits
  // until the ps has closed the connection in turn (an end of stream, or a reset where it left
  // our bytes unread). After this the ps has classified the connection, bar the moment between its
  // closing and its counting.
  void hang_up() {
    ::shutdown(fd_, SHUT_WR);
    const IoDeadline deadline = patient_deadline();
    std::byte sink[4096];
    try {
      while (stream_->read_some(sink, deadline) > 0) {
      }
    } catch (const TransportError&) {
      if (Clock::now() >= deadline.until) throw;
    }
  }

 private:
  std::string address_;
  int fd_ = -1;  // owned by stream_
  std::unique_ptr<TcpStream> stream_;
  std::unique_ptr<Connection> connection_;  // after stream_: closed first
};

// Random bytes that cannot open a frame (the magic's first byte is 'D').
std::vector<std::byte> garbage_bytes(std::mt19937& random, size_t min_bytes, size_t max_bytes) {
  std::vector<std::byte> bytes(std::uniform_int_distribution<size_t>(min_bytes, max_bytes)(random));
  for (std::byte& b : bytes) b = static_cast<std::byte>(random());
  if (bytes[0] == std::byte{'D'}) bytes[0] = std::byte{'X'};
  return bytes;
}

// What the hostile client did to one ps, as the ps's summary should count it.
struct GarbageCounts {
  int64_t rejected = 0;  // never authenticated
  int64_t failed = 0;    // authenticated, then garbage
};

// Opens and drops hostile connections to every ps in turn until stopped: silence, random bytes,
// half a handshake, garbage after a whole handshake. Each ends with the ps closing it, so the ps
// has seen every one by the time stop() returns.
class GarbageClient {
 public:
  struct Report {
    std::vector<GarbageCounts> per_ps;
    std::string error;  // the first connection that went wrong on our side, if any
  };

  GarbageClient(std::vector<uint16_t> ports, uint32_t seed)
      : ports_(std::move(ports)),
        random_(seed),
        counts_(ports_.size()),
        thread_([this](std::stop_token stop) { run(stop); }) {}

  // Stops after the connection under way. REQUIRES: called once.
  Report stop() {
    thread_.request_stop();
    thread_.join();  // publishes counts_ and error_ to this thread
    return {counts_, error_};
  }

 private:
  enum Kind { kSilence, kRandomBytes, kHalfHandshake, kAfterHandshake, kKinds };

  void run(std::stop_token stop) {
    std::mutex mutex;
    std::condition_variable_any never_notified;
    auto next = Clock::now();
    for (size_t i = 0; !stop.stop_requested(); ++i) {
      const size_t ps = i % ports_.size();
      try {
        one_connection(ports_[ps], static_cast<Kind>(i / ports_.size() % kKinds), counts_[ps]);
      } catch (const std::exception& error) {
        error_ = fmt::format("ps{}: {}", ps, error.what());
        return;
      }
      next += std::chrono::milliseconds(1000 / kGarbagePerSecond);
      // Pacing, not synchronisation: stop() ends the wait at once.
      std::unique_lock lock(mutex);
      never_notified.wait_until(lock, stop, next, [] { return false; });
    }
  }

  void one_connection(uint16_t port, Kind kind, GarbageCounts& counts) {
    RawPeer peer(port);
    switch (kind) {
      case kSilence:
        break;
      case kRandomBytes:  // often shorter than a frame header, so the ps waits for the rest
        peer.write(garbage_bytes(random_, 1, 200));
        break;
      case kHalfHandshake:
        peer.say_hello();
        break;
      case kAfterHandshake:  // at least a header, so that the ps refuses it without waiting
        peer.authenticate(testing::kSecret);
        peer.write(garbage_bytes(random_, frame_format::kHeaderBytes, 200));
        break;
      case kKinds:
        break;
    }
    peer.hang_up();
    ++(kind == kAfterHandshake ? counts.failed : counts.rejected);
  }

  const std::vector<uint16_t> ports_;
  std::mt19937 random_;
  std::vector<GarbageCounts> counts_;  // the client's thread's until stop()
  std::string error_;                  // likewise
  std::jthread thread_;                // last: it uses everything above
};

// The descriptors a ps holds, counted while a probe connection of ours is half-way through its
// handshake. The ps releases a finished connection's descriptor only when it next accepts one, so
// counting at that moment gives the same figure whenever nothing leaks: every connection but the
// workers' and the probe's has been released. The probe is counted as rejected.
int ps_fds_under_probe(uint16_t port, pid_t pid) {
  RawPeer probe(port);
  probe.say_hello();
  const std::optional<int> fds = testing::open_fds(pid);
  probe.hang_up();
  if (!fds) throw std::runtime_error(fmt::format("cannot read /proc/{}/fd", pid));
  return *fds;
}

// ---- the cluster and what the test saw of it ----

// How long and how fast one run goes, all from its duration.
struct Plan {
  explicit Plan(std::chrono::seconds d)
      : duration(d),
        steps(d.count() * kWorkers * 1000 / kStepDelayMs),
        warm_up(std::min<std::chrono::seconds>(d / 4, kLongestWarmUp)),
        rss_slack(warm_up < kLongestWarmUp ? kShortRunRssSlackBytes : 0),
        // About fifty step lines per worker: progress to follow, not a log to read.
        log_every(std::max<int64_t>(10, steps / kWorkers / 50)),
        sample_every(
            std::clamp<std::chrono::milliseconds>(std::chrono::milliseconds(d) / 100, 250ms, 1s)),
        // Far beyond a slow machine's start-up and end, well short of ctest's timeout.
        patience(d * 3 / 2 + 120s) {}

  std::chrono::seconds duration;
  int64_t steps;  // global steps to train
  std::chrono::seconds warm_up;
  int64_t rss_slack;
  int64_t log_every;
  std::chrono::milliseconds sample_every;
  std::chrono::seconds patience;  // from the start to the last exit
};

// What the test saw of one task while it ran.
struct Task {
  std::string name;
  std::unique_ptr<DtrainProcess> process;
  bool running = true;
  int fds = 0;  // the latest sample
  int64_t peak_rss = 0;
  int64_t rss_at_warm_up = -1;  // the first sample once warm-up was over
  int64_t peak_rss_after_warm_up = 0;
  // ps tasks: under a probe, once every worker was training; workers: at the end of the warm-up,
  // by when each has its every connection (and, through memory, its link's) in place.
  int fds_at_start = -1;
  int fds_at_end = -1;  // ps tasks: under a probe, once the hostile client had stopped
  int peak_fds_after_warm_up = 0;
};

// Every task, started by hand with `dtrain task` as on a real cluster: the ps tasks first, then
// the workers.
std::vector<Task> start_cluster(const testing::HandStartedCluster& cluster, const Plan& plan,
                                const std::filesystem::path& data_dir) {
  const std::pair<std::string, std::string> flag_values[] = {
      {"--model", "softmax"},
      {"--threads", "1"},
      {"--data_dir", data_dir.string()},
      {"--validation_size", "1000"},
      {"--train_steps", std::to_string(plan.steps)},
      {"--step_delay_ms", std::to_string(kStepDelayMs)},
      {"--log_every", std::to_string(plan.log_every)},
      // Every variable split over both ps tasks, so that both serve every step.
      {"--min_shard_bytes", "4096"},
      {"--peer_timeout", "120"},
  };
  std::vector<std::string> flags;
  for (const auto& [flag, value] : flag_values) flags.insert(flags.end(), {flag, value});
  std::vector<Task> tasks;
  for (int i = 0; i < kPs + kWorkers; ++i) {
    const std::string job = i < kPs ? "ps" : "worker";
    const int index = i < kPs ? i : i - kPs;
    tasks.push_back(
        {.name = job + std::to_string(index), .process = cluster.start(job, index, flags)});
  }
  return tasks;
}

// Reads the task's RSS and descriptors; marks it done once it has exited.
// `hostile`: the hostile client is running, the phase whose descriptors are checked; a worker's
// own end (it reads /proc/self/status for its closing line) opens one more for a moment, no leak.
void sample(Task& task, bool warm, bool hostile) {
  const std::optional<int> fds = testing::open_fds(task.process->pid());
  const std::optional<int64_t> rss = testing::resident_bytes(task.process->pid());
  if (!rss || !fds) {
    task.running = false;
    return;
  }
  task.fds = *fds;
  task.peak_rss = std::max(task.peak_rss, *rss);
  if (warm) {
    if (hostile) task.peak_fds_after_warm_up = std::max(task.peak_fds_after_warm_up, *fds);
    if (task.rss_at_warm_up < 0) task.rss_at_warm_up = *rss;
    task.peak_rss_after_warm_up = std::max(task.peak_rss_after_warm_up, *rss);
  }
}

// The whole number right after the first `prefix` in text; nullopt if there is none.
std::optional<int64_t> number_after(std::string_view text, std::string_view prefix) {
  const size_t at = text.find(prefix);
  if (at == std::string_view::npos) return std::nullopt;
  int64_t number = 0;
  const char* begin = text.data() + at + prefix.size();
  const auto [end, error] = std::from_chars(begin, text.data() + text.size(), number);
  if (error != std::errc()) return std::nullopt;
  return number;
}

// The global step of the newest step line of any worker; -1 before the first.
int64_t progress(const std::vector<Task>& tasks) {
  int64_t step = -1;
  for (const Task& task : tasks) {
    const std::string line = task.process->last_line_containing(", global_step=");
    if (const auto at = number_after(line, ", global_step=")) step = std::max(step, *at);
  }
  return step;
}

bool every_worker_training(const std::vector<Task>& tasks) {
  for (size_t i = kPs; i < tasks.size(); ++i)
    if (tasks[i].process->last_line_containing(", global_step=").empty()) return false;
  return true;
}

// The run, watched from this thread until every task has exited or patience has run out. Its
// phases follow the workers' step lines: once every worker trains, the ps tasks' descriptors are
// counted and the hostile client starts (and warm-up begins); at 70% of the steps the client
// stops, and the descriptors are counted again.
struct Watched {
  Clock::time_point spawned, started, ended;  // started: every worker was training
  GarbageClient::Report garbage;
  std::vector<int> probes = std::vector<int>(kPs, 0);  // probe connections to each ps
  std::vector<std::string> hung;                       // tasks still running at the end
};

Watched watch(std::vector<Task>& tasks, const Plan& plan, const std::vector<uint16_t>& ps_ports,
              Clock::time_point spawned) {
  Watched w;
  w.spawned = spawned;
  bool started = false, warm = false, garbage_stopped = false;
  std::optional<GarbageClient> garbage;
  const auto count_ps_fds = [&](int ps, int Task::*figure) {
    tasks[ps].*figure = ps_fds_under_probe(ps_ports[ps], tasks[ps].process->pid());
    ++w.probes[ps];
  };
  for (;;) {
    const auto now = Clock::now();
    const bool was_warm = warm;
    warm = warm || (started && now >= w.started + plan.warm_up);
    for (Task& task : tasks)
      if (task.running) sample(task, warm, garbage.has_value());
    // The workers' baseline. Taken when they first printed a step line, it could miss a second ps
    // connection still finishing its link (one descriptor, seen once in the gate).
    if (warm && !was_warm) {
      for (size_t i = kPs; i < tasks.size(); ++i) tasks[i].fds_at_start = tasks[i].fds;
    }
    if (std::none_of(tasks.begin(), tasks.end(), [](const Task& t) { return t.running; })) break;
    if (now > spawned + plan.patience) break;
    const int64_t step = progress(tasks);
    if (!started && every_worker_training(tasks)) {
      // The baseline: each worker connected to each ps, and no hostile connection yet.
      started = true;
      w.started = now;
      for (int ps = 0; ps < kPs; ++ps) count_ps_fds(ps, &Task::fds_at_start);
      garbage.emplace(ps_ports, /*seed=*/5);
    } else if (garbage && step >= plan.steps * 7 / 10) {
      // The step lines run up to a second behind (ten local steps of a worker), up to 5% of the
      // steps of a short run; what is left after 70% still takes at least a quarter of the
      // duration, time enough to count the descriptors again before the first ps exits.
      w.garbage = garbage->stop();
      garbage.reset();
      garbage_stopped = true;
    } else if (garbage_stopped && step < plan.steps * 85 / 100) {
      // Counted at a later sample than the stop, and again while the figure differs: a
      // connection may still have been between its closing and its counting at the first count,
      // whereas a leaked descriptor stays.
      for (int ps = 0; ps < kPs; ++ps) {
        if (tasks[ps].fds_at_end != tasks[ps].fds_at_start && w.probes[ps] < 4)
          count_ps_fds(ps, &Task::fds_at_end);
      }
    }
    // Sampling, not synchronisation: the figures are snapshots at this pace.
    std::this_thread::sleep_until(now + plan.sample_every);
  }
  w.ended = Clock::now();
  if (garbage) w.garbage = garbage->stop();
  for (const Task& task : tasks)
    if (task.running) w.hung.push_back(task.name);
  return w;
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// Growth after warm-up, as a fraction of the RSS then.
double rss_growth(const Task& task) {
  return static_cast<double>(task.peak_rss_after_warm_up - task.rss_at_warm_up) /
         static_cast<double>(task.rss_at_warm_up);
}

// The figures docs/testing.md ("Soak test") quotes.
void print_figures(const Plan& plan, const std::vector<Task>& tasks, const Watched& w,
                   const std::vector<testing::PsSummary>& summaries) {
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  fmt::print(
      "soak: {} tasks ({} ps, {} workers), DTRAIN_SOAK_SECONDS={}: {:.1f} s from start to "
      "the last exit, {:.1f} s of it with every worker training; {} global steps\n",
      tasks.size(), kPs, kWorkers, plan.duration.count(), seconds(w.ended - w.spawned),
      seconds(w.ended - w.started), summaries[0].step);
  for (int ps = 0; ps < kPs; ++ps) {
    const GarbageCounts& sent = w.garbage.per_ps[ps];
    fmt::print(
        "soak: {}: {} pushes (shard updates applied); {} hostile connections ({} before the "
        "handshake, {} after it); fds {} at start, {} at end\n",
        tasks[ps].name, summaries[ps].applied, sent.rejected + sent.failed, sent.rejected,
        sent.failed, tasks[ps].fds_at_start, tasks[ps].fds_at_end);
  }
  std::string peaks;
  for (const Task& task : tasks) peaks += fmt::format(", {} {:.1f}", task.name, mib(task.peak_rss));
  fmt::print("soak: peak RSS (MiB): {}\n", peaks.substr(2));
  const auto largest =
      std::max_element(tasks.begin(), tasks.end(),
                       [](const Task& a, const Task& b) { return rss_growth(a) < rss_growth(b); });
  int worker_fds = 0, worker_peak_fds = 0;
  for (size_t i = kPs; i < tasks.size(); ++i) {
    worker_fds = std::max(worker_fds, tasks[i].fds_at_start);
    worker_peak_fds = std::max(worker_peak_fds, tasks[i].peak_fds_after_warm_up);
  }
  fmt::print(
      "soak: largest RSS growth after the {} s warm-up: {:+.2f}% ({:+.0f} KiB, {}){}; "
      "workers' fds at most {} after the warm-up, {} at their peak while the hostile client ran\n",
      plan.warm_up.count(), 100 * rss_growth(*largest),
      (largest->peak_rss_after_warm_up - largest->rss_at_warm_up) / 1024.0, largest->name,
      kSanitized ? " (not checked under AddressSanitizer)" : "", worker_fds, worker_peak_fds);
}

TEST(Soak, ClusterUnderHostileConnectionsEndsWithFlatMemoryAndNoDescriptorLeak) {
  const Plan plan(soak_duration());
  testing::TempDir data;
  write_small_mnist(data.path());
  const testing::HandStartedCluster cluster(kPs, kWorkers);
  std::vector<uint16_t> ps_ports;
  for (int ps = 0; ps < kPs; ++ps) ps_ports.push_back(cluster.ps_port(ps));
  const auto spawned = Clock::now();
  std::vector<Task> tasks = start_cluster(cluster, plan, data.path());
  const Watched w = watch(tasks, plan, ps_ports, spawned);

  EXPECT_TRUE(w.hung.empty()) << "deadlock or stall: " << fmt::format("{}", fmt::join(w.hung, ", "))
                              << " still running " << plan.patience.count() << " s after the start";
  std::vector<ProcessResult> results;
  for (Task& task : tasks) results.push_back(task.process->wait(w.hung.empty() ? 10s : 0s));

  // Every task ended well and every worker said so.
  for (size_t i = 0; i < tasks.size(); ++i)
    ASSERT_EQ(results[i].exit_code, 0) << tasks[i].name << ": " << testing::all_output(results[i]);
  for (int worker = 0; worker < kWorkers; ++worker) {
    const std::string& out = results[kPs + worker].out;
    EXPECT_EQ(
        testing::count_lines_containing(out, fmt::format("worker={}: test accuracy = 0.", worker)),
        1)
        << out;
    EXPECT_EQ(testing::count_lines_containing(
                  out, fmt::format("worker={}: training elapsed time: ", worker)),
              1)
        << out;
  }
  EXPECT_EQ(w.garbage.error, "") << "the hostile client";
  ASSERT_EQ(w.garbage.per_ps.size(), size_t{kPs}) << "the workers never all began training";

  // Each ps trained the whole way and counted every hostile connection as what it was, and the
  // probes (which never authenticate) with them; the workers' connections all ended normally.
  std::vector<testing::PsSummary> summaries;
  for (int ps = 0; ps < kPs; ++ps) {
    const auto summary = testing::ps_summary(results[ps].out, ps);
    ASSERT_TRUE(summary) << tasks[ps].name << ": " << testing::all_output(results[ps]);
    const GarbageCounts& sent = w.garbage.per_ps[ps];
    EXPECT_GE(summary->step, plan.steps);
    EXPECT_GT(sent.rejected, 0);
    EXPECT_GT(sent.failed, 0);
    EXPECT_EQ(summary->rejected, sent.rejected + w.probes[ps]) << tasks[ps].name;
    EXPECT_EQ(summary->failed, sent.failed) << tasks[ps].name << ": " << results[ps].out;
    summaries.push_back(*summary);
  }

  // No descriptor leak: each ps is back where it was before the hostile client began, and no
  // worker held more while it ran than at the end of its warm-up.
  for (int ps = 0; ps < kPs; ++ps)
    EXPECT_EQ(tasks[ps].fds_at_end, tasks[ps].fds_at_start) << tasks[ps].name;
  for (size_t i = kPs; i < tasks.size(); ++i)
    EXPECT_LE(tasks[i].peak_fds_after_warm_up, tasks[i].fds_at_start) << tasks[i].name;

  // Flat memory after warm-up. Under AddressSanitizer resident memory measures its quarantine of
  // freed blocks more than the program; its leak checker, run as each task exits, covers leaks
  // there.
  for (const Task& task : tasks) {
    ASSERT_GT(task.rss_at_warm_up, 0) << task.name << " ended before its warm-up did";
    if (kSanitized) continue;
    EXPECT_LE(task.peak_rss_after_warm_up - task.rss_at_warm_up,
              static_cast<int64_t>(kRssGrowth * static_cast<double>(task.rss_at_warm_up)) +
                  plan.rss_slack)
        << task.name << ": " << mib(task.rss_at_warm_up) << " MiB after warm-up, peak "
        << mib(task.peak_rss_after_warm_up) << " MiB";
  }

  print_figures(plan, tasks, w, summaries);
}

}  // namespace
}  // namespace dtrain
