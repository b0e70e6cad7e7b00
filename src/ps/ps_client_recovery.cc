// PsClient's recovery from a lost ps task: reconnecting within the operation's deadline, re-seeding
// a ps that came back without its variables (or waiting for the chief to), and the lines that say
// what was lost. Split from ps_client.cc, which keeps the lanes and the operations.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <span>
#include <string>

#include "base/error.h"
#include "ps/ps_client.h"

namespace dtrain {

namespace proto = ps_protocol;

void PsClient::reconnect(Lane& lane, const std::string& why,
                         std::chrono::steady_clock::time_point deadline, int losses) {
  const HostPort& address = options_.ps[static_cast<size_t>(lane.ps)];
  if (losses == 1) {
    report(fmt::format("lost ps{} ({}:{}): {}; reconnecting for up to {} s", lane.ps, address.host,
                       address.port, why, options_.connection.connect_timeout_ms / 1000));
  } else {
    report(fmt::format("lost ps{} ({}:{}) again, {} times in this operation: {}; reconnecting",
                       lane.ps, address.host, address.port, losses, why));
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  int64_t step = 0;
  const bool memory_before = lane.connection->link_traits().in_memory;
  const uint64_t instance_before = lane.instance;
  PeerWait wait = ps_wait(options_, lane.ps, deadline, "reconnect to");
  retry_connection(wait, [&] {
    lane.connection = connect_to_ps(options_, lane.ps, wait);
    step = say_hello(lane);
  });
  if (const bool memory = lane.connection->link_traits().in_memory; memory != memory_before) {
    report(memory ? fmt::format("payloads to ps{} now go through memory", lane.ps)
                  : fmt::format("payloads to ps{} now go over TCP: {}", lane.ps,
                                lane.connection->why_by_value()));
  }
  int64_t before = 0;
  for (size_t shard : map_.shards_of_ps[static_cast<size_t>(lane.ps)])
    before = std::max(before, shard_step_[shard]);
  if (!lane.initialized) {
    if (options_.reseed_from == nullptr) {
      step = wait_reseeded(lane, wait);
    } else {
      reseed(lane, before);
      return;
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // A restarted ps went back to its checkpoint (or to the chief's copy) even when other workers
  // have since pushed it past the step this worker last saw, so the step it started from, not its
  // current one, says what was lost.
  const bool restarted = lane.instance != instance_before;
  const int64_t back_to = restarted && lane.restored_step >= 0 ? lane.restored_step : step;
  if (back_to < before) {
    const int64_t lost = before - back_to;
    report(fmt::format(
        "ps{} is back after {:.1f} s, restored at global step {}: the {} step{} after that {} "
        "lost",
        lane.ps, seconds, back_to, lost, lost == 1 ? "" : "s", lost == 1 ? "is" : "are"));
  } else {
    report(fmt::format("reconnected to ps{} after {:.1f} s", lane.ps, seconds));
  }
}

void PsClient::reseed(Lane& lane, int64_t step) {
  const ParamSet& values = *options_.reseed_from;
  for (size_t shard : map_.shards_of_ps[static_cast<size_t>(lane.ps)]) {
    const Shard& s = map_.shards[shard];
    const std::span<const float> tensors[] = {values.flat().subspan(s.begin, s.size())};
    lane.meta.clear();
    lane.meta.put(static_cast<uint32_t>(shard)).put(step).put(uint32_t{0});
    lane.connection->send(proto::kInit, 0, lane.meta.bytes(), tensors);
    // One shard at a time: the acknowledgements are read on this thread, which is also sending.
    proto::MetaReader r(lane.expect(proto::kAck).meta);
    if (r.get<uint32_t>() != shard) {
      throw FrameError(fmt::format("bad reply from {}: acknowledged another shard than {}",
                                   lane.connection->peer(), shard));
    }
    shard_step_[shard] = step;
  }
  lane.initialized = true;
  report(fmt::format(
      "ps{} restarted without a checkpoint: re-seeded from worker{}'s copy at step {} (updates "
      "from other workers since then are lost, and its optimizer state starts again from zero)",
      lane.ps, worker_, step));
}

int64_t PsClient::wait_reseeded(Lane& lane, PeerWait& wait) {
  report(fmt::format(
      "ps{} restarted without a checkpoint; waiting for the chief to re-seed it from its copy",
      lane.ps));
  constexpr uint32_t kSliceMs = 1000;  // how soon a stop request or the deadline is noticed
  for (;;) {
    wait.check_stop();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        wait.deadline() - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      throw Error(fmt::format(
          "ps{} came back without its variables and the chief did not re-seed it within {:.0f} s: "
          "it found no checkpoint to restore them from; give every task the same --train_dir, "
          "and the chief --save_steps or --save_secs",
          lane.ps, std::chrono::duration<double>(wait.options().timeout).count()));
    }
    lane.meta.clear();
    lane.meta.put(std::min(kSliceMs, static_cast<uint32_t>(left.count())));
    lane.connection->send(proto::kWaitReady, 0, lane.meta.bytes(), {});
    proto::MetaReader r(lane.expect(proto::kReady).meta);
    if (r.get<uint8_t>() != 0) break;
  }
  // A second hello reads the step the chief re-seeded it at.
  return say_hello(lane);
}

}  // namespace dtrain
