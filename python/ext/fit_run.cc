// The run's thread never touches Python: it writes records and text into FitEvents under a mutex,
// and the calling thread takes them out between waits of at most kPoll, with the GIL, which it
// releases while it waits. kPoll is how soon a line or a Ctrl-C is seen; the run itself never
// waits for it.
#include "ext/fit_run.h"

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <exception>
#include <mutex>
#include <optional>
#include <streambuf>
#include <string>
#include <thread>
#include <vector>

#include "metrics/run_log.h"

namespace py = pybind11;

namespace dtrain::python {
namespace {

constexpr auto kPoll = std::chrono::milliseconds(100);

// What the run produced since Python last looked, and whether it has ended.
class FitEvents final : public RunLogSink, public std::streambuf {
 public:
  void write(const RunRecord& record) override {
    if (record.scalars.empty()) return;  // histograms and texts are TensorBoard's
    const std::lock_guard lock(mutex_);
    records_.push_back({record.step, record.scalars, record.final});
  }

  void finish() {
    const std::lock_guard lock(mutex_);
    ended_ = true;
    changed_.notify_all();
  }

  // Waits up to `timeout` for the end; true once the run has ended.
  bool wait_for_end(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [this] { return ended_; });
  }

  struct Batch {
    std::vector<RunRecord> records;
    std::string text;
  };
  Batch take() {
    const std::lock_guard lock(mutex_);
    Batch batch{std::move(records_), std::move(text_)};
    records_.clear();
    text_.clear();
    return batch;
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
  std::condition_variable changed_;
  std::vector<RunRecord> records_;
  std::string text_;
  bool ended_ = false;
};

void deliver(const FitEvents::Batch& batch, const FitCallbacks& callbacks) {
  if (!callbacks.on_text.is_none() && !batch.text.empty()) callbacks.on_text(batch.text);
  if (callbacks.on_record.is_none()) return;
  for (const RunRecord& record : batch.records) {
    py::dict scalars;
    for (const auto& [name, value] : record.scalars) scalars[py::str(name)] = value;
    callbacks.on_record(record.step, scalars, record.final);
  }
}

// Python runs its signal handlers between bytecodes, so Ctrl-C raises KeyboardInterrupt inside
// whichever callback is running, or from PyErr_CheckSignals between them.
bool is_keyboard_interrupt(const py::error_already_set& error) {
  return error.matches(PyExc_KeyboardInterrupt);
}

}  // namespace

FitRun::FitRun(RunPlan plan, const InMemoryData& data, FitCallbacks callbacks)
    : plan_(std::move(plan)), data_(data), callbacks_(std::move(callbacks)) {}

InProcessResult FitRun::run() {
  FitEvents events;
  StopRequest stop;
  plan_.config.stop = &stop;
  plan_.config.observer = &events;
  std::ostream out(&events);
  std::optional<InProcessResult> result;
  std::exception_ptr failure;
  std::jthread runner([&] {
    try {
      result = run_plan_in_process(plan_, data_, out);
    } catch (...) {
      failure = std::current_exception();
    }
    events.finish();
  });
  // Whatever leaves this loop early (a callback's exception) first stops the run and waits for it:
  // the run reads the caller's arrays.
  struct StopOnExit {
    StopRequest& stop;
    std::jthread& runner;
    ~StopOnExit() {
      if (!runner.joinable()) return;
      stop.request(SIGINT);
      py::gil_scoped_release release;
      runner.join();
    }
  } stop_on_exit{stop, runner};
  for (bool ended = false; !ended;) {
    {
      py::gil_scoped_release release;
      ended = events.wait_for_end(kPoll);
    }
    take_interrupt([&] { deliver(events.take(), callbacks_); }, stop);
    take_interrupt(
        [] {
          if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        },
        stop);
  }
  {
    py::gil_scoped_release release;
    runner.join();
  }
  take_interrupt([&] { deliver(events.take(), callbacks_); }, stop);
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

void FitRun::raise_interrupt() {
  std::unique_ptr<py::error_already_set> pending = std::move(interrupt_);
  throw std::move(*pending);
}

}  // namespace dtrain::python
