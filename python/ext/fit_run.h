// A run of Python's fit: the training on threads of its own, while the calling thread, holding the
// GIL only between waits, hands the run's lines and the chief's step boundaries to Python (the
// Keras callbacks), answers with their orders, and watches for Ctrl-C.
#pragma once

#include <pybind11/pybind11.h>

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "base/stop_request.h"
#include "plan/in_process_run.h"
#include "train/run_control.h"

namespace dtrain::python {

// Python's side of a run, either may be None:
//   on_event(kind, epoch, batch, step, learning_rate, examples_per_sec, logs)
//     -> (stop, learning_rate or None) at
//     each of the chief's boundaries (train/run_control.h; kind "train_begin", "epoch_begin",
//     "batch_begin", "batch_end", "epoch_end"), while the chief waits for the answer;
//   on_text(str) for what the chief prints.
// wants_batches: whether the batch events are wanted.
struct FitCallbacks {
  pybind11::object on_event = pybind11::none();
  pybind11::object on_text = pybind11::none();
  bool wants_batches = false;
};

// Runs run_plan_in_process(plan, data) with plan.config's stop and owner set here. Ctrl-C (or
// another signal Python handles) stops the run at its next step boundary; the result then has a
// halt_signal, and the pending KeyboardInterrupt is raised by the caller once it has kept the
// state (interrupted() says so). An exception of on_event stops the run at that boundary, as
// Keras's stop_training would, and is raised the same way (callback_failed()). Throws what the run
// throws, or what on_text raised, after the run has stopped.
class FitRun final : public RunOwner {
 public:
  FitRun(RunPlan plan, const InMemoryData& data, FitCallbacks callbacks);
  InProcessResult run();
  // Python's pending exception (KeyboardInterrupt, or a callback's) after run() returned.
  bool interrupted() const { return static_cast<bool>(interrupt_); }
  bool callback_failed() const { return static_cast<bool>(callback_error_); }
  [[noreturn]] void raise_pending();

  // Whether the chief waits at a boundary for Python's answer: only then are its weights still.
  bool paused();
  // The chief's state at this boundary, made on its thread (the GIL released meanwhile).
  // REQUIRES: paused(), the GIL.
  const Checkpoint& weights();

  // RunOwner, on the chief's thread.
  bool wants_batches() const override { return callbacks_.wants_batches; }
  RunOrders on_event(const RunEvent& event, const RunWeights& weights) override;

 private:
  // Runs body; a KeyboardInterrupt it raises is kept for raise_pending() and stops the run.
  template <typename Body>
  void take_interrupt(const Body& body, StopRequest& stop);
  // Hands the chief's waiting event, if any, to Python and posts its answer.
  void answer_event(StopRequest& stop);
  // Python answers no more events (it failed, or the run is being stopped): each is a stop.
  void abandon();

  RunPlan plan_;
  const InMemoryData& data_;
  FitCallbacks callbacks_;
  std::unique_ptr<pybind11::error_already_set> interrupt_;
  std::unique_ptr<pybind11::error_already_set> callback_error_;

  // The hand-over of the chief's events. GUARDED_BY(mutex_), all of it.
  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<RunEvent> event_;  // the chief waits on this one
  bool event_taken_ = false;       // Python is deciding it
  std::optional<RunOrders> answer_;
  bool abandoned_ = false;
  bool weights_wanted_ = false;
  std::optional<Checkpoint> weights_;  // of this boundary, once made
  std::exception_ptr weights_error_;
  bool ended_ = false;
};

}  // namespace dtrain::python
