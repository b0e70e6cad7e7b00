// A worker's side of an elastic job's membership (cluster/membership_service.h): it says who it is
// and what it trains, then at the start and after every change reports ready and receives the
// view its ring forms from. A thread reads the coordinator's announcements meanwhile: one of a
// change raises the ring interrupt, so that a ring waiting on a worker that is gone stops at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "base/error.h"
#include "cluster/membership_view.h"
#include "collective/ring_interrupt.h"
#include "comm/host_port.h"
#include "comm/tcp_congestion.h"

namespace dtrain {

class Connection;

// A worker that asks to join a job that has already finished (the launcher's restart of a worker
// lost near the end): nothing is wrong, and nothing is left to do.
class JobEnded : public Error {
 public:
  using Error::Error;
};

// The coordinator dropped this worker from the job (it did not report in time at a change): the
// job went on without it, and it may join again as a worker that holds no state.
class DroppedFromJob : public Error {
 public:
  using Error::Error;
};

struct MembershipClientOptions {
  HostPort coordinator;
  std::string secret;  // the cluster secret, raw bytes
  bool authenticate_frames = true;
  std::string tcp_congestion = kTcpCongestionAuto;  // ConnectionOptions::tcp_congestion
  std::string name;                                 // this worker's task name, "worker1"
  // What this worker trains (the settings all-reduce workers must agree on): the coordinator
  // refuses a worker whose settings differ from the job's, naming where.
  nlohmann::json settings;
  int timeout_ms = 60'000;  // to reach the coordinator, and to wait for a view
};

// Thread-safety: one thread makes the calls; interrupt() is for that thread's rings.
class MembershipClient {
 public:
  // Connects, says hello and waits to be admitted. Throws TransportError / AuthError if the
  // coordinator cannot be reached or refuses the secret, Error with its words if it refuses this
  // worker (another model or flags, a name taken, --max_workers reached), JobEnded if the job has
  // finished.
  explicit MembershipClient(MembershipClientOptions options);
  ~MembershipClient();
  MembershipClient(const MembershipClient&) = delete;
  MembershipClient& operator=(const MembershipClient&) = delete;

  RingInterrupt& interrupt() { return interrupt_; }
  // The job's --workers, as the coordinator says: what its steps are counted by.
  int planned_workers() const { return planned_workers_; }
  // The job's --min_workers: the fewest a view ever holds.
  int min_workers() const { return min_workers_; }

  // Reports this worker ready to form the next view — its state at global step `step` (-1: none
  // yet), listening at `address` — and waits for that view. Throws Error with the coordinator's
  // words when this worker is refused or the job cannot go on (below --min_workers), or when the
  // coordinator is lost; JobEnded when the job has finished; DroppedFromJob when the coordinator
  // dropped this worker.
  MembershipView next_view(int64_t step, const HostPort& address);

  // Leaves the job at `step`: cleanly, the others re-forming without this worker (a SIGTERM), or
  // because the run is over for everyone (finished). Then no more calls.
  void leave(int64_t step, const std::string& why, bool finished);

 private:
  void read_announcements();
  void fail(const std::string& error);

  const MembershipClientOptions options_;
  RingInterrupt interrupt_;
  std::unique_ptr<Connection> connection_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::optional<MembershipView> view_;  // the newest view, until next_view takes it
  std::string error_;                   // why the job cannot go on for this worker
  bool ended_ = false;                  // ... because it has finished
  bool dropped_ = false;                // ... because it dropped this worker
  uint64_t in_view_ = 0;                // the view this worker last formed its ring from
  int planned_workers_ = 0;
  int min_workers_ = 0;
  std::atomic<bool> closing_ = false;  // the destructor closes the link: no error, then
  std::thread reader_;
};

}  // namespace dtrain
