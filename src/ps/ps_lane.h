// One worker's connection to one ps task, a lane of PsClient (ps/ps_client.h): the connection with
// its sender and receiver threads, what the last hello said, and how a lane's connection is made
// and, once lost, made again.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "comm/connection.h"
#include "comm/peer_wait.h"
#include "ps/ps_client_options.h"
#include "ps/ps_protocol.h"

namespace dtrain {

// A thread that runs one posted job at a time; wait() returns when it is done and rethrows what
// it threw.
class JobThread {
 public:
  JobThread() : thread_([this](std::stop_token stop) { loop(stop); }) {}
  ~JobThread() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
  }

  void post(std::function<void()> job) {
    {
      std::lock_guard lock(mutex_);
      job_ = std::move(job);
      pending_ = true;
    }
    changed_.notify_all();
  }

  void wait() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !pending_; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void loop(std::stop_token) {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return pending_ || stopping_; });
      if (pending_) {
        auto job = std::move(job_);
        lock.unlock();
        std::exception_ptr error;
        try {
          job();
        } catch (...) {
          error = std::current_exception();
        }
        lock.lock();
        error_ = error;
        pending_ = false;
        changed_.notify_all();
      } else if (stopping_) {
        return;
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::function<void()> job_;  // guarded by mutex_
  bool pending_ = false;       // guarded by mutex_
  bool stopping_ = false;      // guarded by mutex_
  std::exception_ptr error_;   // guarded by mutex_
  std::jthread thread_;        // last: started once the rest exists
};

// Not thread-safe: one PsClient operation at a time drives its lanes.
class PsLane {
 public:
  PsLane(int ps, std::unique_ptr<Connection> connection)
      : ps(ps), connection(std::move(connection)) {}
  int ps;
  std::unique_ptr<Connection> connection;
  bool initialized = false;  // as of the last hello
  // As of the last hello: which ps process answered (a restarted ps has another) and the step of
  // the checkpoint it restored, -1 for none.
  uint64_t instance = 0;
  int64_t restored_step = -1;
  ps_protocol::MetaWriter meta;  // the sender's
  JobThread sender, receiver;

  // Reads the next reply, which must be of type `expected`; a kError reply becomes an Error with
  // the ps's message.
  Connection::Incoming expect(uint16_t expected);
};

// The options of the connection to ps `ps`: its task name, the ps protocol's tensor rule, and the
// identity of this worker, which the ps binds its pushes to.
ConnectionOptions ps_connection_options(const PsClientOptions& options, int ps);
// A wait for ps `ps` until deadline, its lines to options.report; verb: "connect to",
// "reconnect to". REQUIRES: deadline is options.connection.connect_timeout_ms after the operation
// began (the span its give-up line states).
PeerWait ps_wait(const PsClientOptions& options, int ps,
                 std::chrono::steady_clock::time_point deadline, const char* verb);
// One connection to ps `ps`, handshake done, within wait (connect() retries refusals).
std::unique_ptr<Connection> connect_to_ps(const PsClientOptions& options, int ps, PeerWait& wait);
// The same, retrying a connection that breaks before it is up, as a reconnection does.
std::unique_ptr<Connection> connect_to_ps_retrying(const PsClientOptions& options, int ps,
                                                   std::chrono::steady_clock::time_point deadline);
// Runs attempt until it succeeds, retrying TransportError but AuthError within wait; then
// throws wait's give-up error (one naming the ps, its address, one duration and the last error).
void retry_connection(PeerWait& wait, const std::function<void()>& attempt);

}  // namespace dtrain
