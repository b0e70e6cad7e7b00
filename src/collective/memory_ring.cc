// MemoryRing: one mutex guards every inbox and the ring's failure; each rank waits on a condition
// variable of its own, and a failure wakes them all.
#include "collective/memory_ring.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include "base/error.h"

namespace dtrain {

struct MemoryRing::Shared {
  struct Message {
    ChunkTag tag;
    ElementType type = ElementType::kFloat32;
    std::vector<std::byte> data;
  };
  struct Rank {
    std::deque<Message> from_left;
    std::deque<Message> from_right;
    std::condition_variable arrived;      // a message for this rank, a rank listens, or a failure
    std::optional<uint64_t> fingerprint;  // RingOptions::fingerprint, once the rank listens
    std::deque<Message>& inbox(Side from) { return from == Side::kLeft ? from_left : from_right; }
  };

  explicit Shared(int n) : ranks(static_cast<size_t>(n)) {}

  // Records the ring's failure (the first one wins) and wakes every rank. REQUIRES: mutex held.
  void fail(std::string_view message) {
    if (failure.empty()) failure = message;
    for (Rank& rank : ranks) rank.arrived.notify_all();
  }

  std::mutex mutex;
  std::vector<Rank> ranks;  // guarded by mutex
  std::string failure;      // guarded by mutex; empty while the ring works
  std::atomic<int> waiting = 0;
  std::atomic<int> messages = 0;
  std::atomic<long> floats_sent = 0;
};

class MemoryRing::Links final : public RingLinks {
 public:
  Links(std::shared_ptr<Shared> shared, int rank, int timeout_ms)
      : shared_(std::move(shared)), rank_(rank), timeout_ms_(timeout_ms) {}

  void adopt(const RingOptions& options) {
    timeout_ms_ = options.timeout_ms;
    job_ = options.job;
    std::lock_guard lock(shared_->mutex);
    shared_->ranks[static_cast<size_t>(rank_)].fingerprint = options.fingerprint;
    for (Shared::Rank& rank : shared_->ranks) rank.arrived.notify_all();
  }

  // Waits for the left neighbour to listen and refuses it, as TCP ring formation does, when it
  // runs another model or configuration: no ring of the two can do anything but fail later.
  void join() {
    const int left = peer(Side::kLeft);
    std::unique_lock lock(shared_->mutex);
    const std::optional<uint64_t>& theirs = shared_->ranks[static_cast<size_t>(left)].fingerprint;
    const bool joined = shared_->ranks[static_cast<size_t>(rank_)].arrived.wait_for(
        lock, std::chrono::milliseconds(timeout_ms_),
        [&] { return theirs.has_value() || !shared_->failure.empty(); });
    throw_if_failed();
    if (!joined) {
      fail(fmt::format("{} did not join the ring within {} s (seen by {})", name(left),
                       timeout_ms_ / 1000.0, name(rank_)));
    }
    const uint64_t mine = *shared_->ranks[static_cast<size_t>(rank_)].fingerprint;
    if (*theirs != mine) {
      fail(fmt::format(
          "{} refused its left neighbour: {} ({}) runs another model or configuration "
          "(fingerprint {:016x}, {} has {:016x}): check --model and the flags that shape the "
          "parameters",
          name(rank_), describe_link(Side::kLeft), name(left), *theirs, name(rank_), mine));
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(shared_->ranks.size()); }

  void send(Side to, ConstTypedSpan data, ChunkTag tag) override {
    Shared::Rank& receiver = shared_->ranks[static_cast<size_t>(peer(to))];
    const std::span<const std::byte> bytes = data.bytes();
    {
      std::lock_guard lock(shared_->mutex);
      throw_if_failed();
      receiver.inbox(opposite(to)).push_back({tag, data.type(), {bytes.begin(), bytes.end()}});
    }
    ++shared_->messages;
    shared_->floats_sent += static_cast<long>(bytes.size() / sizeof(float));
    receiver.arrived.notify_all();
  }

  void recv(Side from, TypedSpan into, ChunkTag tag) override {
    Shared::Rank& self = shared_->ranks[static_cast<size_t>(rank_)];
    std::unique_lock lock(shared_->mutex);
    std::deque<Shared::Message>& box = self.inbox(from);
    ++shared_->waiting;
    const bool arrived = self.arrived.wait_for(lock, std::chrono::milliseconds(timeout_ms_), [&] {
      return !box.empty() || !shared_->failure.empty();
    });
    --shared_->waiting;
    throw_if_failed();
    if (!arrived) {
      fail(fmt::format("lost {}: timed out: no data for {} s (seen by {})", name(peer(from)),
                       timeout_ms_ / 1000.0, name(rank_)));
    }
    Shared::Message message = std::move(box.front());
    box.pop_front();
    // As TcpRing checks: the tag, then the type (which changes the length too), then the length.
    const bool same_tag = message.tag == tag;
    if (same_tag && message.type != into.type()) {
      fail(
          fmt::format("{} sent {} as {} where {} expected {}: the ranks do not encode their "
                      "gradients alike",
                      name(peer(from)), to_string(tag), to_string(message.type), name(rank_),
                      to_string(into.type())));
    }
    if (!same_tag || message.data.size() != into.size_bytes()) {
      fail(fmt::format(
          "{} sent {} ({} bytes) where {} expected {} ({} bytes): the ranks are not running "
          "the same collectives",
          name(peer(from)), to_string(message.tag), message.data.size(), name(rank_),
          to_string(tag), into.size_bytes()));
    }
    std::copy(message.data.begin(), message.data.end(), into.bytes().begin());
  }

  // Messages are copied when sent: the sender's memory is its own again at once.
  void wait_sent() override {
    std::lock_guard lock(shared_->mutex);
    throw_if_failed();
  }

  void abort(std::string_view reason) override {
    std::lock_guard lock(shared_->mutex);
    shared_->fail(reason);
  }

  std::string describe_link(Side /*side*/) const override { return "memory"; }

 private:
  int peer(Side side) const {
    return side == Side::kRight ? (rank_ + 1) % size() : (rank_ + size() - 1) % size();
  }
  std::string name(int rank) const { return fmt::format("{}{}", job_, rank); }

  // REQUIRES: mutex held.
  void throw_if_failed() const {
    if (!shared_->failure.empty()) throw CollectiveError(shared_->failure);
  }
  // REQUIRES: mutex held.
  [[noreturn]] void fail(const std::string& message) {
    shared_->fail(message);
    throw CollectiveError(shared_->failure);
  }

  const std::shared_ptr<Shared> shared_;
  const int rank_;
  int timeout_ms_;
  std::string job_ = "rank";
};

namespace {

class MemoryRingConnector final : public RingConnector {
 public:
  explicit MemoryRingConnector(std::unique_ptr<MemoryRing::Links> links)
      : links_(std::move(links)) {}

  void listen(const RingOptions& options) override {
    if (options.size != links_->size() || options.rank != links_->rank()) {
      throw std::invalid_argument(fmt::format("MemoryRing: rank {} of {} joins as rank {} of {}",
                                              links_->rank(), links_->size(), options.rank,
                                              options.size));
    }
    links_->adopt(options);
  }

  std::unique_ptr<RingLinks> connect() override {
    if (!links_) throw std::logic_error("RingConnector::connect called twice");
    links_->join();
    return std::move(links_);
  }

  bool has_address() const override { return false; }

  void abort(std::string_view reason) override {
    if (links_) links_->abort(reason);
  }

 private:
  std::unique_ptr<MemoryRing::Links> links_;
};

}  // namespace

MemoryRing::MemoryRing(int n, int timeout_ms) : shared_(std::make_shared<Shared>(n)) {
  if (n < 1) throw std::invalid_argument(fmt::format("MemoryRing: {} ranks", n));
  for (int r = 0; r < n; ++r) links_.push_back(std::make_unique<Links>(shared_, r, timeout_ms));
}

MemoryRing::~MemoryRing() = default;

int MemoryRing::size() const { return static_cast<int>(links_.size()); }

RingLinks& MemoryRing::links(int rank) {
  const std::unique_ptr<Links>& links = links_.at(static_cast<size_t>(rank));
  if (!links) throw std::logic_error(fmt::format("MemoryRing: rank {} was handed out", rank));
  return *links;
}

std::unique_ptr<RingConnector> MemoryRing::connector(int rank) {
  std::unique_ptr<Links>& links = links_.at(static_cast<size_t>(rank));
  if (!links) throw std::logic_error(fmt::format("MemoryRing: rank {} handed out twice", rank));
  return std::make_unique<MemoryRingConnector>(std::move(links));
}

int MemoryRing::waiting() const { return shared_->waiting; }
int MemoryRing::messages() const { return shared_->messages; }
long MemoryRing::floats_sent() const { return shared_->floats_sent; }

void MemoryRing::run(const std::function<void(int rank)>& body) {
  std::vector<std::exception_ptr> errors(links_.size());
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < size(); ++r) {
      threads.emplace_back([&, r] {
        try {
          body(r);
        } catch (...) {
          errors[static_cast<size_t>(r)] = std::current_exception();
        }
      });
    }
  }
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

}  // namespace dtrain
