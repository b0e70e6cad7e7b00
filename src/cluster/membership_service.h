// The coordinator of an elastic job (issue 35): it settles who is in the job at each change and
// tells every worker, which then re-forms its ring at a step boundary (docs/elastic.md). Workers
// connect to it with the cluster secret, say who they are and what they train (their settings, so
// that one with another model or other flags is refused naming the difference), and report ready
// at each change with the step their state is at. A worker whose connection closes without a word
// (killed, crashed) or that says it leaves (SIGTERM) is dropped; one that connects later asks to
// join. The local launcher runs it in its own process, so any worker may come and go.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "comm/tcp_congestion.h"

namespace dtrain {

struct MembershipOptions {
  std::string bind_host = "127.0.0.1";
  uint16_t port = 0;   // 0: a free port (MembershipService::port())
  std::string secret;  // the cluster secret, raw bytes
  bool authenticate_frames = true;
  std::string tcp_congestion = kTcpCongestionAuto;  // ConnectionOptions::tcp_congestion
  int workers = 1;      // the first view waits for this many (--workers)
  int min_workers = 1;  // below this many, the job fails
  int max_workers = 1;  // joiners beyond this many are refused
  // How long the first view waits for --workers of them before it forms with at least
  // --min_workers, and how long a change waits for a member's report before dropping it as lost.
  int timeout_ms = 60'000;
};

// Thread-safety: all calls from one thread; the service works on threads of its own.
class MembershipService {
 public:
  // Listens before returning. Throws TransportError if it cannot, UsageError for bad options.
  explicit MembershipService(const MembershipOptions& options);
  ~MembershipService();  // stops serving
  MembershipService(const MembershipService&) = delete;
  MembershipService& operator=(const MembershipService&) = delete;

  uint16_t port() const;
  // Views settled so far, and membership changes (leaves, losses, joins) among them.
  uint64_t views() const;

 private:
  class Coordinator;
  std::unique_ptr<Coordinator> coordinator_;
};

}  // namespace dtrain
