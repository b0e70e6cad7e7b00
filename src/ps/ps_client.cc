// PsClient: lanes of (connection, sender thread, receiver thread), and each operation as a pair of
// functions, what to send to a ps and what to read back from it, run on every lane at once.
#include "ps/ps_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "base/error.h"
#include "comm/connect.h"
#include "comm/tcp_congestion.h"
#include "ps/shard_store.h"

namespace dtrain {

namespace proto = ps_protocol;

PsClient::PsClient(const ParamSet& layout, const PartitionMap& map, PsClientOptions options)
    : map_(map),
      options_(std::move(options)),
      worker_(options_.worker),
      shard_step_(map.shards.size(), 0) {
  if (options_.ps.size() != static_cast<size_t>(map.num_ps())) {
    throw Error(fmt::format("the partition map has {} ps tasks but the cluster names {}",
                            map.num_ps(), options_.ps.size()));
  }
  fingerprint_ = partition_fingerprint(layout, map);
  if (options_.stall_warning_ms > 0 && options_.stall_report) {
    std::vector<std::string> names;
    for (size_t p = 0; p < options_.ps.size(); ++p) names.push_back(fmt::format("ps{}", p));
    wait_watch_ =
        std::make_unique<WaitWatch>(std::chrono::milliseconds(options_.stall_warning_ms),
                                    std::move(names), options_.stall_why, options_.stall_report);
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(options_.connection.connect_timeout_ms);
  try {
    for (size_t p = 0; p < options_.ps.size(); ++p) {
      const int ps = static_cast<int>(p);
      lanes_.push_back(std::make_unique<Lane>(ps, connect_to_ps_retrying(options_, ps, deadline)));
    }
    // Each lane's receiver thread says hello and reads the answer; the senders have nothing to do.
    round([](Lane&) {}, [&](Lane& lane) { say_hello(lane); });
  } catch (const StopRequested&) {
    throw;
  } catch (const Error& error) {
    // The ps tasks this worker did reach learn that it will not come.
    report_failure(error.what());
    throw;
  }
}

void PsClient::report_failure(const std::string& why) noexcept {
  if (worker_ < 0) return;
  for (auto& lane : lanes_) {
    if (!lane->connection || !lane->connection->is_open()) continue;
    try {
      lane->meta.clear();
      lane->meta.put(static_cast<int32_t>(worker_)).put_string(why);
      lane->connection->send(proto::kWorkerFailed, 0, lane->meta.bytes(), {});
    } catch (const std::exception&) {
      // The ps is gone too: nobody left to tell.
    }
  }
}

PsClient::~PsClient() = default;

void PsClient::say_settings(Lane& lane) {
  if (options_.settings.empty()) return;
  // A ps that learns them waits for the chief's; the other workers ask until it has heard them.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(options_.connection.connect_timeout_ms);
  for (bool reported = false;; reported = true) {
    lane.meta.clear();
    lane.meta.put(proto::kMaxReadyWaitMs).put_string(options_.settings);
    lane.connection->send(proto::kSettings, 0, lane.meta.bytes(), {});
    proto::MetaReader r(lane.expect(proto::kSettingsReply).meta);
    if (r.get<uint8_t>() != 0) return;
    if (std::chrono::steady_clock::now() >= deadline) {
      throw Error(fmt::format("ps{} has not heard from the chief what the job trains in {} s",
                              lane.ps, options_.connection.connect_timeout_ms / 1000));
    }
    if (!reported) {
      report(
          fmt::format("ps{} waits for the chief (worker 0) to say what the job trains", lane.ps));
    }
  }
}

int64_t PsClient::say_hello(Lane& lane) {
  say_settings(lane);
  lane.meta.clear();
  lane.meta.put(fingerprint_).put(static_cast<int32_t>(worker_));
  lane.connection->send(proto::kHello, 0, lane.meta.bytes(), {});
  proto::MetaReader r(lane.expect(proto::kHelloReply).meta);
  const auto ps = r.get<int32_t>();
  const bool initialized = r.get<uint8_t>() != 0;
  const auto next_sequence = r.get<uint64_t>();
  const auto step = r.get<int64_t>();
  const auto instance = r.get<uint64_t>();
  const auto restored_step = r.get<int64_t>();
  if (ps != lane.ps) {
    throw Error(
        fmt::format("{} says it is ps{}: the ps hosts are listed in another order "
                    "than that task was started with",
                    lane.connection->peer(), ps));
  }
  lane.instance = instance;
  lane.restored_step = restored_step;
  std::lock_guard lock(mutex_);
  initialized_at_hello_ = initialized_at_hello_ && initialized;
  lane.initialized = initialized;
  sequence_ = std::max(sequence_, next_sequence);
  return step;
}

LinkTraits PsClient::link_traits(int ps) const {
  return lanes_.at(static_cast<size_t>(ps))->connection->link_traits();
}

std::string PsClient::describe_link(int ps) const {
  return lanes_.at(static_cast<size_t>(ps))->connection->describe_link();
}

void PsClient::report(const std::string& line) const {
  if (options_.report) options_.report(line);
}

template <typename Send, typename Receive>
void PsClient::round(Send&& send, Receive&& receive, bool by_caller) {
  std::vector<Lane*> pending;
  for (auto& lane : lanes_) pending.push_back(lane.get());
  std::optional<std::chrono::steady_clock::time_point> give_up_at;
  int losses = 0;
  auto backoff = std::chrono::milliseconds(50);
  // receive(lane), with a meta block too short for its reply turned into the FrameError it is.
  const auto receive_checked = [&receive](Lane& l) {
    try {
      receive(l);
    } catch (const proto::ShortMeta& error) {
      throw FrameError(fmt::format("bad reply from {}: {}", l.connection->peer(), error.what()));
    }
  };
  while (!pending.empty()) {
    // Lanes whose connection broke are done again after a reconnect; any other error ends the
    // operation.
    std::exception_ptr first;
    std::vector<std::pair<Lane*, std::string>> lost;
    // Runs part of a lane's work (a template, so that the steady state allocates nothing).
    const auto outcome = [&](Lane& lane, std::string& why, auto&& part) {
      try {
        part();
      } catch (const TransportError& error) {
        // The lane is unusable now; closing it wakes its other thread.
        lane.connection->close();
        if (why.empty()) why = error.what();
      } catch (...) {
        lane.connection->close();
        if (!first) first = std::current_exception();
      }
    };
    std::vector<std::string> why(pending.size());
    if (by_caller && std::all_of(pending.begin(), pending.end(), [](const Lane* l) {
          return l->connection->link_traits().in_memory;
        })) {
      // Every frame is small, so sending never waits for a reply being read: this thread sends
      // every lane's requests, then reads each lane's replies in turn, where handing them to two
      // threads a lane would cost more wake-ups than the frames cost to move.
      for (size_t i = 0; i < pending.size(); ++i)
        outcome(*pending[i], why[i], [&] { send(*pending[i]); });
      for (size_t i = 0; i < pending.size(); ++i) {
        if (why[i].empty()) outcome(*pending[i], why[i], [&] { receive_checked(*pending[i]); });
      }
      // The ps copied what it was sent before it replied (or, refusing it, released it unread).
      for (size_t i = 0; i < pending.size(); ++i) {
        if (why[i].empty()) outcome(*pending[i], why[i], [&] { pending[i]->connection->settle(); });
      }
    } else {
      for (Lane* l : pending) {
        // The sender waits until the ps has copied what it posted, while the receiver reads.
        l->sender.post([&send, l] {
          send(*l);
          l->connection->settle();
        });
        l->receiver.post([&receive_checked, l] { receive_checked(*l); });
      }
      for (size_t i = 0; i < pending.size(); ++i) {
        for (JobThread* thread : {&pending[i]->sender, &pending[i]->receiver})
          outcome(*pending[i], why[i], [thread] { thread->wait(); });
      }
    }
    for (size_t i = 0; i < pending.size(); ++i) {
      if (!why[i].empty()) lost.emplace_back(pending[i], why[i]);
    }
    if (first) std::rethrow_exception(first);
    pending.clear();
    if (lost.empty()) break;
    // A lane lost again right after it reconnected (a path that alters every frame, a ps that
    // drops each request) is retried with backoff until connect_timeout_ms after the first loss
    // of this operation, then given up: never a tight loop of reconnections.
    ++losses;
    const auto now = std::chrono::steady_clock::now();
    if (!give_up_at) {
      give_up_at = now + std::chrono::milliseconds(options_.connection.connect_timeout_ms);
    } else {
      if (now + backoff >= *give_up_at) {
        const Lane& lane = *lost.front().first;
        throw TransportError(fmt::format(
            "lost ps{} {} times in one operation, each time right after reconnecting, for {} s; "
            "giving up: {}",
            lane.ps, losses - 1, options_.connection.connect_timeout_ms / 1000,
            lost.front().second));
      }
      // Pacing reconnections to a peer that keeps dropping us; nothing is synchronised with.
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
    }
    for (auto& [lane, why] : lost) {
      reconnect(*lane, why, *give_up_at, losses);
      pending.push_back(lane);
    }
  }
}

void PsClient::note_reply(int ps, const proto::ShardReply& reply) {
  // Each lane writes only its own shards' entries.
  shard_step_[reply.shard] = reply.step;
  if (reply.finished) finished_ = true;
  if (reply.halting) halting_ = true;
  // Every ps counts the same workers; ps0's word is the one taken.
  if (ps == 0) worker_changes_ = reply.worker_changes;
}

bool PsClient::wait_ready(int timeout_ms) {
  bool ready = true;
  round(
      [&](Lane& lane) {
        lane.meta.clear();
        lane.meta.put(static_cast<uint32_t>(timeout_ms));
        lane.connection->send(proto::kWaitReady, 0, lane.meta.bytes(), {});
      },
      [&](Lane& lane) {
        proto::MetaReader r(lane.expect(proto::kReady).meta);
        if (r.get<uint8_t>() == 0) {
          std::lock_guard lock(mutex_);
          ready = false;
        }
      });
  return ready;
}

void PsClient::initialize(const ParamSet& params, const std::vector<ParamSet>& slots,
                          int64_t step) {
  round(
      [&](Lane& lane) {
        std::vector<std::span<const float>> tensors;
        for (size_t shard : map_.shards_of_ps[lane.ps]) {
          const Shard& s = map_.shards[shard];
          tensors.clear();
          tensors.push_back(params.flat().subspan(s.begin, s.size()));
          for (const ParamSet& slot : slots)
            tensors.push_back(slot.flat().subspan(s.begin, s.size()));
          lane.meta.clear();
          lane.meta.put(static_cast<uint32_t>(shard))
              .put(step)
              .put(static_cast<uint32_t>(slots.size()));
          lane.connection->send(proto::kInit, 0, lane.meta.bytes(), tensors);
        }
      },
      [&](Lane& lane) {
        for (size_t shard : map_.shards_of_ps[lane.ps]) {
          proto::MetaReader r(lane.expect(proto::kAck).meta);
          if (r.get<uint32_t>() != shard) {
            throw FrameError(fmt::format("bad reply from {}: acknowledged another shard than {}",
                                         lane.connection->peer(), shard));
          }
          shard_step_[shard] = step;
        }
      });
}

namespace {

// Reads a kValues / kPushReply / kState header for the expected shard.
proto::ShardReply read_reply_for(const Connection::Incoming& in, size_t shard,
                                 const Connection& connection) {
  proto::MetaReader r(in.meta);
  const proto::ShardReply reply = proto::read_shard_reply(r);
  if (reply.shard != shard) {
    throw FrameError(fmt::format("bad reply from {}: shard {} where {} was expected",
                                 connection.peer(), reply.shard, shard));
  }
  return reply;
}

}  // namespace

namespace {

// Ends a WaitWatch's operation however the round ends.
class WatchedOperation {
 public:
  WatchedOperation(WaitWatch* watch, const char* what, int64_t step) : watch_(watch) {
    if (watch_) watch_->begin(what, step);
  }
  ~WatchedOperation() {
    if (watch_) watch_->end();
  }
  WatchedOperation(const WatchedOperation&) = delete;
  WatchedOperation& operator=(const WatchedOperation&) = delete;
  void answered(int ps) const {
    if (watch_) watch_->answered(static_cast<size_t>(ps));
  }

 private:
  WaitWatch* watch_;
};

}  // namespace

void PsClient::pull(ParamSet& params) {
  const WatchedOperation watched(wait_watch_.get(), "pull", global_step());
  round(
      [&](Lane& lane) {
        // Through memory the ps writes each shard straight into its place in the arena.
        for (size_t shard : map_.shards_of_ps[lane.ps]) {
          const Shard& s = map_.shards[shard];
          lane.connection->offer_landing(params.flat().subspan(s.begin, s.size()));
        }
        lane.connection->send(proto::kPull, 0, {}, {});
      },
      [&](Lane& lane) {
        for (size_t shard : map_.shards_of_ps[lane.ps]) {
          const Shard& s = map_.shards[shard];
          const auto in = lane.expect(proto::kValues);
          const proto::ShardReply reply = read_reply_for(in, shard, *lane.connection);
          const std::span<float> into[] = {params.flat().subspan(s.begin, s.size())};
          lane.connection->receive_tensors(into);
          note_reply(lane.ps, reply);
        }
        watched.answered(lane.ps);
      },
      /*by_caller=*/true);
}

RoundOutcome PsClient::push_pull(const GradSet& grads, ParamSet& params, float lr) {
  const uint64_t sequence = sequence_++;
  // Sync: every shard's gradient says it was computed at the global step, the lowest of the
  // shards' steps. Normally they are all equal. A worker killed between two shards' frames leaves
  // its step applied on some shards and not on others; a shard a step ahead then drops these
  // gradients as stale while the ones behind complete their step, and the shards are level
  // again. Were each shard's own step used, a ps connection waiting for a step on the shard
  // ahead (it answers each push before it reads the next) would keep another worker's push for
  // a shard behind from being read: a deadlock.
  const int64_t computed_at = global_step();
  const WatchedOperation watched(wait_watch_.get(), "push and pull", computed_at);
  std::vector<RoundOutcome> outcomes(lanes_.size());
  round(
      [&](Lane& lane) {
        for (size_t shard : map_.shards_of_ps[lane.ps]) {
          const Shard& s = map_.shards[shard];
          lane.meta.clear();
          proto::write(lane.meta, proto::PushMeta{.shard = static_cast<uint32_t>(shard),
                                                  .worker = worker_,
                                                  .sequence = sequence,
                                                  .computed_at_step = computed_at,
                                                  .lr = lr,
                                                  .want_values = 1});
          const std::span<const float> grad = grads.flat().subspan(s.begin, s.size());
          const std::span<const float> tensors[] = {grad};
          lane.connection->offer_landing(params.flat().subspan(s.begin, s.size()));
          lane.connection->post(proto::kPush, 0, lane.meta.bytes(), tensors);
        }
      },
      [&](Lane& lane) {
        RoundOutcome& outcome = outcomes[static_cast<size_t>(lane.ps)];
        outcome = {};  // a retry after a reconnect counts afresh
        for (size_t shard : map_.shards_of_ps[lane.ps]) {
          const Shard& s = map_.shards[shard];
          const auto in = lane.expect(proto::kPushReply);
          const proto::ShardReply reply = read_reply_for(in, shard, *lane.connection);
          const std::span<float> into[] = {params.flat().subspan(s.begin, s.size())};
          lane.connection->receive_tensors(into);
          note_reply(lane.ps, reply);
          switch (static_cast<PushResult::Outcome>(reply.outcome)) {
            case PushResult::Outcome::kApplied:
              ++outcome.applied;
              break;
            case PushResult::Outcome::kAccepted:
              ++outcome.accepted;
              break;
            case PushResult::Outcome::kDuplicate:
              ++outcome.duplicates;
              break;
            case PushResult::Outcome::kStale:
              ++outcome.stale;
              break;
            case PushResult::Outcome::kRejected:
              ++outcome.rejected;
              break;
          }
        }
        watched.answered(lane.ps);
      },
      /*by_caller=*/true);
  RoundOutcome total;
  for (const RoundOutcome& o : outcomes) {
    total.applied += o.applied;
    total.accepted += o.accepted;
    total.duplicates += o.duplicates;
    total.stale += o.stale;
    total.rejected += o.rejected;
  }
  return total;
}

void PsClient::pull_state(ParamSet& params, std::vector<ParamSet>& slots) {
  round([&](Lane& lane) { lane.connection->send(proto::kPullState, 0, {}, {}); },
        [&](Lane& lane) {
          for (size_t shard : map_.shards_of_ps[lane.ps]) {
            const Shard& s = map_.shards[shard];
            const auto in = lane.expect(proto::kState);
            const proto::ShardReply reply = read_reply_for(in, shard, *lane.connection);
            std::vector<std::span<float>> into{params.flat().subspan(s.begin, s.size())};
            for (ParamSet& slot : slots) into.push_back(slot.flat().subspan(s.begin, s.size()));
            lane.connection->receive_tensors(into);
            note_reply(lane.ps, reply);
          }
        });
}

proto::DoneReply PsClient::worker_done(bool finished) {
  return counters_round(proto::kDoneReply, [&](Lane& lane) {
    lane.meta.clear();
    lane.meta.put(static_cast<int32_t>(worker_)).put(static_cast<uint8_t>(finished));
    lane.connection->send(proto::kWorkerDone, 0, lane.meta.bytes(), {});
  });
}

proto::DoneReply PsClient::counters() {
  return counters_round(proto::kCountersReply,
                        [&](Lane& lane) { lane.connection->send(proto::kCounters, 0, {}, {}); });
}

proto::DoneReply PsClient::counters_round(uint16_t reply_type,
                                          const std::function<void(Lane&)>& request) {
  proto::DoneReply total;
  round(request, [&](Lane& lane) {
    proto::MetaReader r(lane.expect(reply_type).meta);
    const proto::DoneReply reply = proto::read_done_reply(r);
    std::lock_guard lock(mutex_);
    if (lane.ps == 0) {
      total.step = reply.step;
      total.workers = reply.workers;
      total.worker_steps = reply.worker_steps;
    }
    total.applied += reply.applied;
    total.stale_dropped += reply.stale_dropped;
    total.duplicates += reply.duplicates;
    total.rejected += reply.rejected;
  });
  return total;
}

int64_t PsClient::global_step() const {
  return shard_step_.empty() ? 0 : *std::min_element(shard_step_.begin(), shard_step_.end());
}

}  // namespace dtrain
