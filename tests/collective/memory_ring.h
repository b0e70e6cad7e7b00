// RingLinks in memory: n ranks in one process, each on its own thread, every message copied into
// the receiving neighbour's inbox for that side. Lets the algorithms be tested, and counted,
// without a network.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/error.h"
#include "collective/ring_links.h"

namespace dtrain::testing {

class MemoryRing {
 public:
  explicit MemoryRing(int n) {
    for (int r = 0; r < n; ++r) links_.push_back(std::make_unique<Links>(*this, r, n));
  }

  RingLinks& links(int rank) { return *links_[rank]; }
  int size() const { return static_cast<int>(links_.size()); }
  // How many ranks are blocked in recv right now.
  int waiting() const { return waiting_; }
  // Messages sent so far, over all ranks.
  int messages() const { return messages_; }
  // Floats sent so far, over all ranks.
  long floats_sent() const { return floats_sent_; }

  // Runs body(rank) on one thread per rank; rethrows the first exception any of them threw.
  void run(const std::function<void(int rank)>& body) {
    std::vector<std::exception_ptr> errors(links_.size());
    {
      std::vector<std::jthread> threads;
      for (int r = 0; r < size(); ++r) {
        threads.emplace_back([&, r] {
          try {
            body(r);
          } catch (...) {
            errors[r] = std::current_exception();
          }
        });
      }
    }
    for (auto& error : errors) {
      if (error) std::rethrow_exception(error);
    }
  }

 private:
  struct Message {
    ChunkTag tag;
    std::vector<float> data;
  };

  class Links final : public RingLinks {
   public:
    Links(MemoryRing& ring, int rank, int n) : ring_(ring), rank_(rank), n_(n) {}
    int rank() const override { return rank_; }
    int size() const override { return n_; }

    void send(Side to, std::span<const float> data, ChunkTag tag) override {
      const int peer = to == Side::kRight ? (rank_ + 1) % n_ : (rank_ + n_ - 1) % n_;
      Links& receiver = *ring_.links_[peer];
      {
        std::lock_guard lock(receiver.mutex_);
        receiver.inbox(opposite(to)).push_back(Message{tag, {data.begin(), data.end()}});
      }
      ++ring_.messages_;
      ring_.floats_sent_ += static_cast<long>(data.size());
      receiver.arrived_.notify_all();
    }

    void recv(Side from, std::span<float> into, ChunkTag tag) override {
      std::unique_lock lock(mutex_);
      std::deque<Message>& box = inbox(from);
      ++ring_.waiting_;
      const bool arrived =
          arrived_.wait_for(lock, std::chrono::seconds(30), [&] { return !box.empty(); });
      --ring_.waiting_;
      if (!arrived) throw CollectiveError("memory ring: nothing arrived for " + to_string(tag));
      Message message = std::move(box.front());
      box.pop_front();
      if (!(message.tag == tag) || message.data.size() != into.size()) {
        throw CollectiveError("memory ring: got " + to_string(message.tag) + " expecting " +
                              to_string(tag));
      }
      std::copy(message.data.begin(), message.data.end(), into.begin());
    }

    void wait_sent() override {}

   private:
    std::deque<Message>& inbox(Side from) { return from == Side::kLeft ? from_left_ : from_right_; }

    MemoryRing& ring_;
    const int rank_;
    const int n_;
    std::mutex mutex_;
    std::condition_variable arrived_;
    std::deque<Message> from_left_;
    std::deque<Message> from_right_;
  };

  std::vector<std::unique_ptr<Links>> links_;
  std::atomic<int> waiting_ = 0;
  std::atomic<int> messages_ = 0;
  std::atomic<long> floats_sent_ = 0;
};

}  // namespace dtrain::testing
