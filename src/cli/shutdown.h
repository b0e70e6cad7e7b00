// SIGTERM (what Kubernetes sends a pod before it kills it), SIGHUP (a closed terminal) and SIGINT
// (Ctrl-C) ask a task to stop at its next step boundary: the loop ends there, the chief (or a
// local run) writes a last checkpoint, and the process exits with 128 + the signal. Whatever is
// still running --shutdown_timeout after the first signal, or after a second one, exits at once
// with that status, so that a task always leaves within the grace its scheduler gives.
#pragma once

#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "base/stop_request.h"

namespace dtrain::cli {

// Installs the handlers for its lifetime and watches for the signals on a thread of its own,
// the only one that takes them: the constructing thread blocks them, and so does every thread it
// starts from then on (a thread inherits its creator's mask). A signal handled in the middle of
// a step's kernels corrupted the heap now and then (1 run in 4 stopped by SIGTERM on this
// project's AMX machine, in oneDNN's sgemm, whatever its ISA); on the watcher, never. One at a
// time per process (the handlers are the process's). A child forked meanwhile must unblock them
// before it execs, as the local launcher does (masks survive exec).
class GracefulShutdown {
 public:
  // `who` names the task in its lines ("worker0", "dtrain train").
  GracefulShutdown(std::chrono::milliseconds timeout, std::string who);
  ~GracefulShutdown();
  GracefulShutdown(const GracefulShutdown&) = delete;
  GracefulShutdown& operator=(const GracefulShutdown&) = delete;

  const StopRequest& request() const { return request_; }
  // The exit status of a run that stopped for a signal: 128 + the signal; 0 if none came.
  int exit_status() const { return request_.requested() ? 128 + request_.signal() : 0; }

 private:
  void watch();

  StopRequest request_;
  sigset_t blocked_before_;  // the constructing thread's mask, put back by the destructor
  const std::chrono::milliseconds timeout_;
  const std::string who_;
  std::jthread watcher_;  // last: it uses everything above
};

}  // namespace dtrain::cli
