// ps-lite anchor for `dtrain bench ps`: dense push+pull rounds of a float32 model split over P
// ps-lite servers, each applying plain SGD, timed by W workers. One binary for every role; run.sh
// starts the scheduler, the servers and the workers with ps-lite's DMLC_* environment. It is not
// part of dtrain and links nothing of it: its figures are an independent reference.
//
// Vocabulary: the model is `floats` float32 values; part p (p in [0, P)) is the contiguous slice
// [p * part_floats, (p + 1) * part_floats) and is stored on server p under one key. A round is
// one push of the gradients of every part, waited for, then one pull of every part's values,
// waited for (with --fused, one ZPushPull instead: one request and one reply per server, as
// dtrain's own push_pull is).
#include <ps/ps.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

constexpr float kLearningRate = 1e-6f;  // as dtrain bench ps: keeps the values finite
constexpr int kWarmupRounds = 3;
constexpr double kWarmupSeconds = 1.0;
constexpr size_t kMinRounds = 10;
// The timed rounds' times are stored in a vector sized from the warm-up, as dtrain does, so the
// timed loop does not allocate: room for this many times the rounds the fastest warm-up round
// predicts, within kMaxReservedRounds.
constexpr double kRoundsHeadroom = 4.0;
constexpr double kMaxReservedRounds = 1 << 22;
constexpr int kAppId = 0;
constexpr int kCustomerId = 0;

constexpr const char* kUsage =
    "usage: pslite_bench --model_bytes LIST [--secs S] [--fused]\n"
    "  --model_bytes LIST  model sizes, e.g. 1MiB,16MiB (B, KiB, MiB, GiB)\n"
    "  --secs S            least seconds timed per size (default 3), and at least 10 rounds\n"
    "  --fused             one ZPushPull per round instead of a push then a pull\n"
    "Roles and peers come from ps-lite's DMLC_* environment (see run.sh).";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Args {
  std::vector<uint64_t> model_bytes;
  double seconds_per_size = 3.0;
  bool fused = false;
};

// The shift of a binary multiple, or -1; decimal units ("MB") are refused, as dtrain does.
int suffix_shift(std::string_view suffix) {
  std::string lower(suffix);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.empty() || lower == "b") return 0;
  if (lower == "kib") return 10;
  if (lower == "mib") return 20;
  if (lower == "gib") return 30;
  return -1;
}

uint64_t parse_byte_size(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  uint64_t count = 0;
  const auto parsed = std::from_chars(text.data(), text.data() + digits, count);
  const int shift = suffix_shift(text.substr(digits));
  if (digits == 0 || parsed.ec != std::errc() || shift < 0 ||
      count > (std::numeric_limits<uint64_t>::max() >> shift) || count == 0) {
    throw UsageError("--model_bytes '" + std::string(text) +
                     "': expected a byte count such as 4096, 64KiB, 16MiB or 1GiB");
  }
  return count << shift;
}

// "16MiB" for a whole number of a unit, else the bytes: the run script keys its sums on this.
std::string format_bytes(uint64_t bytes) {
  for (const auto& [shift, unit] :
       {std::pair{30, "GiB"}, std::pair{20, "MiB"}, std::pair{10, "KiB"}}) {
    if (bytes >= (uint64_t{1} << shift) && bytes % (uint64_t{1} << shift) == 0)
      return std::to_string(bytes >> shift) + unit;
  }
  return std::to_string(bytes) + "B";
}

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--fused") {
      args.fused = true;
      continue;
    }
    if (i + 1 >= argc) throw UsageError("missing value for " + std::string(flag));
    const std::string_view value = argv[++i];
    if (flag == "--model_bytes") {
      for (size_t begin = 0; begin <= value.size();) {
        const size_t end = std::min(value.find(',', begin), value.size());
        args.model_bytes.push_back(parse_byte_size(value.substr(begin, end - begin)));
        begin = end + 1;
      }
    } else if (flag == "--secs") {
      try {
        args.seconds_per_size = std::stod(std::string(value));
      } catch (const std::exception&) {
        throw UsageError("--secs '" + std::string(value) + "': expected seconds");
      }
      if (!(args.seconds_per_size >= 0)) throw UsageError("--secs must not be negative");
    } else {
      throw UsageError("unknown flag " + std::string(flag));
    }
  }
  if (args.model_bytes.empty()) throw UsageError("--model_bytes: give at least one size");
  return args;
}

// Equal parts, one per server; the model is cut down to a whole number of floats per part (at
// most P - 1 floats dropped), so ps-lite's default slicer can split it without per-key lengths.
size_t part_floats(uint64_t model_bytes, int servers) {
  const size_t floats = model_bytes / sizeof(float);
  if (floats < static_cast<size_t>(servers)) {
    throw UsageError("--model_bytes " + std::to_string(model_bytes) + ": fewer floats than the " +
                     std::to_string(servers) + " servers");
  }
  return floats / static_cast<size_t>(servers);
}

// ---------------------------------------------------------------------------------------------
// Server

// One server's part and its replies. ps-lite runs the handle on this server's one customer
// thread, so requests from all workers are applied one at a time and need no lock.
class SgdServer {
 public:
  void handle(const ps::KVMeta& meta, const ps::KVPairs<float>& request,
              ps::KVServer<float>* server) {
    CHECK_EQ(request.keys.size(), size_t{1}) << "one key per server expected";
    if (meta.push) apply(request.vals);
    if (!meta.pull) {
      server->Response(meta);
      return;
    }
    CHECK(!weights_.empty()) << "pull before any push: the worker must push first";
    ps::KVPairs<float> reply;
    reply.keys = request.keys;
    reply.vals = snapshot(meta.sender);
    server->Response(meta, reply);
  }

 private:
  // A length other than the one held starts a new size: the workers have all left the previous
  // size behind (they meet at a barrier before each), so the part restarts at zeros.
  void apply(const ps::SArray<float>& grads) {
    if (weights_.size() != grads.size()) weights_.assign(grads.size(), 0.0f);
    float* w = weights_.data();
    const float* g = grads.data();
    for (size_t i = 0; i < weights_.size(); ++i) w[i] -= kLearningRate * g[i];
  }

  // The values copied into the sender's own reply buffer, as dtrain's pull copies them into its
  // reply: a snapshot that later pushes from other workers cannot change while ZMQ is still
  // sending it (it sends the buffer in place, holding a reference). Reusing the buffer is safe:
  // this worker sends its next request only after it has received the whole reply.
  ps::SArray<float>& snapshot(int sender) {
    ps::SArray<float>& reply = replies_[sender];
    if (reply.size() != weights_.size()) reply = ps::SArray<float>(weights_.size());
    std::memcpy(reply.data(), weights_.data(), weights_.size() * sizeof(float));
    return reply;
  }

  std::vector<float> weights_;
  std::unordered_map<int, ps::SArray<float>> replies_;  // by the worker's node id
};

// ---------------------------------------------------------------------------------------------
// Worker

// Everything one size needs, allocated once and reused by every round.
struct SizeBuffers {
  SizeBuffers(size_t part_floats, int servers)
      : keys(static_cast<size_t>(servers)),
        grads(part_floats * static_cast<size_t>(servers), 1.0f),
        values(part_floats * static_cast<size_t>(servers)) {
    // ps-lite gives server p the key range [kMaxKey / P * p, kMaxKey / P * (p + 1))
    // (Postoffice::GetServerKeyRanges), so the first key of each range lands part p on server p.
    const auto& ranges = ps::Postoffice::Get()->GetServerKeyRanges();
    CHECK_EQ(ranges.size(), keys.size());
    for (size_t p = 0; p < keys.size(); ++p) keys[p] = ranges[p].begin();
  }
  ps::SArray<ps::Key> keys;  // sorted, one per server
  ps::SArray<float> grads;   // every part's gradients, all 1
  ps::SArray<float> values;  // every part's pulled values
};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The Z* calls send the buffers in place; waiting on each request keeps them untouched until
// the servers have answered.
double timed_round(ps::KVWorker<float>& kv, SizeBuffers& b, bool fused) {
  const auto start = Clock::now();
  if (fused) {
    kv.Wait(kv.ZPushPull(b.keys, b.grads, &b.values));
  } else {
    kv.Wait(kv.ZPush(b.keys, b.grads));
    kv.Wait(kv.ZPull(b.keys, &b.values));
  }
  return seconds(Clock::now() - start);
}

// Every value of a part has had the same updates, all of them -lr * 1, so a part must be uniform
// and negative; a misplaced or unpulled part shows up as zeros or a mismatch.
void check_values(const SizeBuffers& b, size_t part_floats) {
  for (size_t p = 0; p < b.keys.size(); ++p) {
    const float* part = b.values.data() + p * part_floats;
    CHECK(part[0] < 0.0f && std::isfinite(part[0]))
        << "part " << p << " holds " << part[0] << " after the rounds";
    for (size_t i = 1; i < part_floats; ++i)
      CHECK_EQ(part[i], part[0]) << "part " << p << " element " << i << " differs from element 0";
  }
}

// Like dtrain's: the upper median, which one stray slow round does not move.
double median(std::vector<double> values) {
  const auto middle = values.begin() + static_cast<ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

void bench_size(ps::KVWorker<float>& kv, const Args& args, uint64_t requested_bytes) {
  const int servers = ps::NumServers();
  const size_t part = part_floats(requested_bytes, servers);
  SizeBuffers buffers(part, servers);
  const uint64_t model_bytes = buffers.grads.size() * sizeof(float);

  // The workers meet before warming up and before timing (ps-lite's scheduler runs the barrier),
  // so every timed round runs against the same contention, as in dtrain bench ps.
  ps::Postoffice::Get()->Barrier(kCustomerId, ps::kWorkerGroup);
  double fastest = std::numeric_limits<double>::infinity();
  const auto warmup_start = Clock::now();
  for (int r = 0; r < kWarmupRounds || seconds(Clock::now() - warmup_start) < kWarmupSeconds; ++r)
    fastest = std::min(fastest, timed_round(kv, buffers, args.fused));
  ps::Postoffice::Get()->Barrier(kCustomerId, ps::kWorkerGroup);

  std::vector<double> rounds;
  const double predicted = args.seconds_per_size / std::max(fastest, 1e-9);
  rounds.reserve(kMinRounds +
                 static_cast<size_t>(std::min(kRoundsHeadroom * predicted, kMaxReservedRounds)));
  const auto start = Clock::now();
  while (rounds.size() < kMinRounds || seconds(Clock::now() - start) < args.seconds_per_size)
    rounds.push_back(timed_round(kv, buffers, args.fused));
  check_values(buffers, part);

  const double round_s = median(rounds);
  const double gbps = 2.0 * static_cast<double>(model_bytes) / round_s / 1e9;
  // One line per worker; run.sh gathers them (ps-lite gives workers no channel to each other).
  std::printf(
      "pslite %d x %d worker %d: %s median round %.3f ms, %.3f GB/s per worker (%zu rounds)\n",
      servers, ps::NumWorkers(), ps::MyRank(), format_bytes(model_bytes).c_str(), round_s * 1e3,
      gbps, rounds.size());
  std::fflush(stdout);
}

void run_worker(const Args& args) {
  ps::KVWorker<float> kv(kAppId, kCustomerId);
  for (uint64_t bytes : args.model_bytes) bench_size(kv, args, bytes);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  try {
    args = parse_args(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "pslite_bench: %s\n%s\n", e.what(), kUsage);
    return 2;
  }
  try {
    ps::Start(kCustomerId, argv[0]);
    // Declared first, so destroyed after the server whose handle refers to it.
    SgdServer sgd;
    std::unique_ptr<ps::KVServer<float>> server;
    if (ps::IsServer()) {
      server = std::make_unique<ps::KVServer<float>>(kAppId);
      server->set_request_handle([&sgd](const ps::KVMeta& meta, const ps::KVPairs<float>& request,
                                        ps::KVServer<float>* s) { sgd.handle(meta, request, s); });
    }
    if (ps::IsWorker()) run_worker(args);
    // The closing barrier holds the servers until every worker is done with them; the server
    // goes only after ps-lite has stopped its van, so no request can reach a deleted handle.
    ps::Finalize(kCustomerId, /*do_barrier=*/true);
    server.reset();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pslite_bench: %s\n", e.what());
    std::fflush(stderr);
    // _Exit, not return: ps-lite's threads are still running and its Postoffice singleton's
    // destructor would wait on them; run.sh stops the other processes once this one fails.
    std::_Exit(1);
  }
  return 0;
}
