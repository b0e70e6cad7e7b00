// The run's threads never touch Python: the chief's text goes into a buffer under a mutex, and
// the chief's events wait in FitRun until the calling thread, woken at once, has answered them
// with the GIL. Between events the calling thread waits at most kPoll, with the GIL released:
// how soon a line or a Ctrl-C is seen; the run itself never waits for it.
#include "ext/fit_run.h"

#include <pybind11/stl.h>

#include <chrono>
#include <csignal>
#include <optional>
#include <streambuf>
#include <string>
#include <thread>
#include <utility>

namespace py = pybind11;

namespace dtrain::python {
namespace {

constexpr auto kPoll = std::chrono::milliseconds(100);

// What the chief printed since Python last looked.
class FitText final : public std::streambuf {
 public:
  std::string take() {
    const std::lock_guard lock(mutex_);
    return std::exchange(text_, {});
  }

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    const std::lock_guard lock(mutex_);
    text_.append(s, static_cast<size_t>(n));
    return n;
  }
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    const char ch = traits_type::to_char_type(c);
    xsputn(&ch, 1);
    return c;
  }

 private:
  std::mutex mutex_;
  std::string text_;
};

void deliver_text(const std::string& text, const FitCallbacks& callbacks) {
  if (!callbacks.on_text.is_none() && !text.empty()) callbacks.on_text(text);
}

const char* kind_name(RunEvent::Kind kind) {
  switch (kind) {
    case RunEvent::Kind::kTrainBegin:
      return "train_begin";
    case RunEvent::Kind::kEpochBegin:
      return "epoch_begin";
    case RunEvent::Kind::kBatchBegin:
      return "batch_begin";
    case RunEvent::Kind::kBatchEnd:
      return "batch_end";
    case RunEvent::Kind::kEpochEnd:
      return "epoch_end";
  }
  return "";
}

// Python's answer: (stop, learning_rate or None).
RunOrders orders_of(const py::handle& answer) {
  const auto pair = answer.cast<std::pair<bool, std::optional<float>>>();
  return {.learning_rate = pair.second, .stop = pair.first};
}

// Python runs its signal handlers between bytecodes, so Ctrl-C raises KeyboardInterrupt inside
// whichever callback is running, or from PyErr_CheckSignals between them.
bool is_keyboard_interrupt(const py::error_already_set& error) {
  return error.matches(PyExc_KeyboardInterrupt);
}

}  // namespace

FitRun::FitRun(RunPlan plan, const InMemoryData& data, FitCallbacks callbacks)
    : plan_(std::move(plan)), data_(data), callbacks_(std::move(callbacks)) {}

RunOrders FitRun::on_event(const RunEvent& event, const RunWeights& weights) {
  std::unique_lock lock(mutex_);
  if (abandoned_ || callbacks_.on_event.is_none()) return {.stop = abandoned_};
  event_ = event;
  event_taken_ = false;
  changed_.notify_all();
  // No deadline: the calling thread answers every event, or abandons them all when it leaves
  // (abandon() runs on each of its ways out), and the user's callback takes what it takes.
  for (;;) {
    changed_.wait(lock, [&] { return answer_ || weights_wanted_ || abandoned_; });
    if (weights_wanted_) {
      weights_wanted_ = false;
      lock.unlock();
      std::optional<Checkpoint> made;
      std::exception_ptr failed;
      try {
        made = weights();
      } catch (...) {
        failed = std::current_exception();
      }
      lock.lock();
      weights_ = std::move(made);
      weights_error_ = failed;
      changed_.notify_all();
      continue;
    }
    RunOrders orders = answer_ ? *answer_ : RunOrders{.stop = true};
    event_.reset();
    answer_.reset();
    weights_.reset();
    weights_error_ = nullptr;
    return orders;
  }
}

bool FitRun::paused() {
  const std::lock_guard lock(mutex_);
  return event_ && event_taken_ && !answer_;
}

const Checkpoint& FitRun::weights() {
  py::gil_scoped_release release;
  std::unique_lock lock(mutex_);
  if (!weights_ && !weights_error_) {
    weights_wanted_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return weights_ || weights_error_ || abandoned_; });
  }
  if (weights_error_) std::rethrow_exception(weights_error_);
  if (!weights_) throw Error("the run stopped before its weights could be read");
  return *weights_;
}

void FitRun::abandon() {
  const std::lock_guard lock(mutex_);
  abandoned_ = true;
  changed_.notify_all();
}

void FitRun::answer_event(StopRequest& stop) {
  std::optional<RunEvent> event;
  {
    const std::lock_guard lock(mutex_);
    if (!event_ || event_taken_) return;
    event_taken_ = true;
    event = event_;
  }
  RunOrders orders;
  take_interrupt(
      [&] {
        py::dict logs;
        for (const auto& [name, value] : event->logs) logs[py::str(name)] = value;
        try {
          orders = orders_of(callbacks_.on_event(kind_name(event->kind), event->epoch, event->batch,
                                                 event->step, event->learning_rate,
                                                 event->examples_per_second, logs));
        } catch (py::error_already_set& error) {
          if (is_keyboard_interrupt(error)) throw;
          // Keras's fit ends where a callback raised, and raises it: the run stops at this
          // boundary, and fit raises once the run has ended and the model has kept its state.
          callback_error_ = std::make_unique<py::error_already_set>(std::move(error));
          orders.stop = true;
        }
      },
      stop);
  const std::lock_guard lock(mutex_);
  answer_ = orders;
  // After a callback failed, the rest of the run's events are stops, without Python.
  if (callback_error_) abandoned_ = true;
  changed_.notify_all();
}

InProcessResult FitRun::run() {
  FitText text;
  StopRequest stop;
  plan_.config.stop = &stop;
  plan_.config.owner = this;
  std::ostream out(&text);
  std::optional<InProcessResult> result;
  std::exception_ptr failure;
  std::jthread runner([&] {
    try {
      result = run_plan_in_process(plan_, data_, out);
    } catch (...) {
      failure = std::current_exception();
    }
    const std::lock_guard lock(mutex_);
    ended_ = true;
    changed_.notify_all();
  });
  // Whatever leaves this loop early (on_text's exception) first stops the run and waits for it:
  // the run reads the caller's arrays, and the chief may be waiting for an answer.
  struct StopOnExit {
    FitRun& run;
    StopRequest& stop;
    std::jthread& runner;
    ~StopOnExit() {
      if (!runner.joinable()) return;
      stop.request(SIGINT);
      run.abandon();
      py::gil_scoped_release release;
      runner.join();
    }
  } stop_on_exit{*this, stop, runner};
  for (bool ended = false; !ended;) {
    {
      py::gil_scoped_release release;
      std::unique_lock lock(mutex_);
      changed_.wait_for(lock, kPoll, [&] { return ended_ || (event_ && !event_taken_); });
      ended = ended_;
    }
    take_interrupt([&] { deliver_text(text.take(), callbacks_); }, stop);
    answer_event(stop);
    take_interrupt(
        [] {
          if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        },
        stop);
  }
  abandon();
  {
    py::gil_scoped_release release;
    runner.join();
  }
  take_interrupt([&] { deliver_text(text.take(), callbacks_); }, stop);
  if (failure) std::rethrow_exception(failure);
  return std::move(*result);
}

template <typename Body>
void FitRun::take_interrupt(const Body& body, StopRequest& stop) {
  try {
    body();
  } catch (py::error_already_set& error) {
    if (!is_keyboard_interrupt(error)) throw;
    // The first one stops the run; the run's last lines are still delivered, and a second
    // Ctrl-C while it winds down changes nothing.
    if (!interrupt_) interrupt_ = std::make_unique<py::error_already_set>(std::move(error));
    stop.request(SIGINT);
  }
}

void FitRun::raise_pending() {
  std::unique_ptr<py::error_already_set> pending =
      interrupt_ ? std::move(interrupt_) : std::move(callback_error_);
  throw std::move(*pending);
}

}  // namespace dtrain::python
