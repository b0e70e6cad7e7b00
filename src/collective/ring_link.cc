// RingLink's exchanges with a neighbour when a rank fails.
#include "collective/ring_link.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "base/error.h"
#include "collective/ring_protocol.h"

namespace dtrain {

namespace proto = ring_protocol;

void RingLink::send_abort(Connection& to, std::string_view message, int timeout_ms) {
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(timeout_ms);
  // Only what is already on the wire must be finished: a frame cannot be cut short.
  queue.resize(head_started ? head + 1 : head);
  MetaWriter meta;
  meta.put_string(message);
  try {
    while (!idle()) {
      const uint64_t before = to.bytes_moved();
      if (to.continue_send()) {
        head_started = false;
        ++head;
        continue;
      }
      if (to.bytes_moved() != before) continue;
      if (SteadyClock::now() > deadline) return;
      wait_for(to.waitable(false, true), 100);
    }
    to.start_send(proto::kRingAbort, 0, meta.bytes(), {});
    while (!to.continue_send()) {
      if (SteadyClock::now() > deadline) return;
      wait_for(to.waitable(false, true), 100);
    }
  } catch (const TransportError& error) {
    // That neighbour is gone as well; the rank beyond it hears of the failure from its own side.
    spdlog::debug("ring: could not pass the abort on to {}: {}", to.peer(), error.what());
  }
  queue.clear();
  head = 0;
  head_started = false;
}

void RingLink::drain(Connection& from, int timeout_ms) {
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<float> sink;
  try {
    for (;;) {
      const uint64_t before = from.bytes_moved();
      if (header_in) {
        sink.resize(incoming_bytes / sizeof(float));
        if (from.try_receive_tensors(sink)) header_in = false;
      } else if (const auto in = from.try_receive()) {
        if (in->type == proto::kRingAbort) return;  // it has stopped and knows why
        incoming_bytes = in->tensor_bytes;
        header_in = in->tensor_bytes > 0;
      }
      if (from.bytes_moved() != before) continue;
      if (SteadyClock::now() > deadline) return;
      wait_for(from.waitable(true, false), 100);
    }
  } catch (const TransportError&) {
    // That neighbour has gone too (or sent junk): nothing is waiting on us there any more.
  }
}

}  // namespace dtrain
