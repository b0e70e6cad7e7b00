// A run of Python's fit: the training on threads of its own, while the calling thread, holding the
// GIL only between waits, hands the run's records and lines to Python and watches for Ctrl-C.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "base/stop_request.h"
#include "plan/in_process_run.h"

namespace dtrain::python {

// Python's side of a run: on_record(step, {name: value}, final) for each record of the chief's
// run log (metrics/run_log.h), on_text(str) for what the chief prints; either may be None.
struct FitCallbacks {
  pybind11::object on_record = pybind11::none();
  pybind11::object on_text = pybind11::none();
};

// Runs run_plan_in_process(plan, data) with plan.config's stop and observer set here. Ctrl-C (or
// another signal Python handles) stops the run at its next step boundary; the result then has a
// halt_signal, and the pending KeyboardInterrupt is raised by the caller once it has kept the
// state (interrupted() says so). Throws what the run throws, or what a callback raised, after the
// run has stopped.
class FitRun {
 public:
  FitRun(RunPlan plan, const InMemoryData& data, FitCallbacks callbacks);
  InProcessResult run();
  // Python's pending exception (KeyboardInterrupt) after run() returned; none otherwise.
  bool interrupted() const { return static_cast<bool>(interrupt_); }
  [[noreturn]] void raise_interrupt();

 private:
  // Runs body; a KeyboardInterrupt it raises is kept for raise_interrupt() and stops the run.
  template <typename Body>
  void take_interrupt(const Body& body, StopRequest& stop);

  RunPlan plan_;
  const InMemoryData& data_;
  FitCallbacks callbacks_;
  std::unique_ptr<pybind11::error_already_set> interrupt_;
};

}  // namespace dtrain::python
