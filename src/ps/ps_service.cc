// The ps task's request handlers. Each connection's thread receives a request, acts on the store
// and answers it, so replies keep request order; a gradient is applied only after its frame has
// been checked. Sync: a push whose reply must wait for its step hands that reply to the
// connection's replier thread, and so do the pushes after it until the replier has caught up; the
// connection's thread reads on meanwhile. A connection whose payloads travel by reference
// (comm/link_setup.h) has a replier in async mode too: it copies a reply's values from the store
// into the worker's memory while the connection's thread copies and applies the next gradient.
#include "ps/ps_service.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <exception>
#include <random>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/resident_memory.h"
#include "ps/ps_protocol.h"
#include "ps/push_replier.h"
#include "ps/task_counters.h"
#include "tensor/aligned.h"

namespace dtrain {

namespace proto = ps_protocol;

namespace {

uint64_t random_instance() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace

// Per connection, sized once for the largest shard held (values plus every slot).
struct PsService::Scratch {
  explicit Scratch(size_t floats) : buffer(floats) {}
  FloatBuffer buffer;
  proto::MetaWriter meta;
  int worker = -1;  // the training worker that said hello on this connection, if any
  // Sync mode, and connections whose payloads travel by reference: own_replier, started once.
  PushReplier* replier = nullptr;
  std::optional<PushReplier> own_replier;
};

PsService::PsService(PsServiceOptions options, const PsRestoredState* restored)
    : options_(std::move(options)), instance_(random_instance()) {
  if (!options_.learn) configure(restored);
  ServerOptions server = options_.server;
  server.connection.type_carries_tensors = proto::carries_tensors;
  server.connection.transport = options_.transport;
  // Said in the handshake, and how the link step's messages name this task.
  if (server.connection.identity.empty())
    server.connection.identity = proto::ps_identity(options_.ps);
  server_ = std::make_unique<Server>(std::move(server),
                                     [this](Connection& connection) { serve(connection); });
}

PsService::~PsService() { server_->stop(); }

void PsService::run() {
  if (!wait_configured()) {
    server_->stop();
    return;
  }
  const std::string failed = roster_->wait();
  {
    // Bounded: a handler stuck sending to a peer that reads nothing must not hold the exit.
    std::unique_lock lock(requests_mutex_);
    requests_done_.wait_for(lock, kAnswerGrace, [&] { return requests_in_flight_ == 0; });
  }
  server_->stop();
  if (const auto reason = store_->aborted())
    throw Error(fmt::format("ps{}: {}", options_.ps, *reason));
  if (!failed.empty()) throw Error(fmt::format("ps{}: {}", options_.ps, failed));
}

void PsService::initialize_from(const ParamSet& params, const std::vector<ParamSet>& slots,
                                int64_t step) {
  for (size_t shard : store_->shards()) {
    const Shard& s = options_.map.shards[shard];
    std::vector<std::span<const float>> slot_values;
    for (const ParamSet& slot : slots)
      slot_values.push_back(slot.flat().subspan(s.begin, s.size()));
    store_->initialize(shard, params.flat().subspan(s.begin, s.size()), step, slot_values);
  }
}

void PsService::print_summary(std::ostream& out) const {
  if (!configured()) {
    const ServerStats s = server_->stats();
    fmt::print(out,
               "ps{}: stopped before the chief said what the job trains; {} connections ({} "
               "rejected, {} failed)\n",
               options_.ps, s.accepted, s.rejected, s.failed);
    out << std::flush;
    return;
  }
  const ShardCounters total = task_counters(*store_);
  const int64_t step = total.step;
  const ServerStats s = server_->stats();
  fmt::print(out,
             "ps{}: done at global step {}: {} shard updates applied, {} stale gradients dropped, "
             "{} duplicate pushes, {} non-finite gradients rejected; {} connections ({} rejected, "
             "{} failed)\n",
             options_.ps, step, total.applied, total.stale_dropped, total.duplicates,
             total.rejected, s.accepted, s.rejected, s.failed);
  // An elastic job's, or one that takes joiners: who came and went.
  if (const WorkerCount w = store_->workers(); w.workers > 0) {
    fmt::print(out, "ps{}: {} workers in the job at the end ({} joined, {} left during the run)\n",
               options_.ps, w.workers, w.changes - w.left, w.left);
  }
  fmt::print(out, "ps{}: peak resident memory {}\n", options_.ps, format_peak_resident());
  out << std::flush;
}

// One request from its receipt to its answer (PsService::requests_in_flight_).
class PsService::InFlight {
 public:
  explicit InFlight(PsService& service) : service_(service) {
    std::lock_guard lock(service_.requests_mutex_);
    ++service_.requests_in_flight_;
  }
  ~InFlight() {
    std::lock_guard lock(service_.requests_mutex_);
    if (--service_.requests_in_flight_ == 0) service_.requests_done_.notify_all();
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  PsService& service_;
};

void PsService::serve(Connection& connection) {
  // Sized and given its replier once the task knows what it serves (handle()).
  Scratch scratch(0);
  // The connection ends only by an exception (its peer closed it, or broke the format); either
  // way a worker that said hello on it is gone from this connection.
  struct Presence {
    PsService& service;
    int& worker;
    ~Presence() {
      if (worker >= 0) service.roster_->disconnected(worker);
    }
  } presence{*this, scratch.worker};
  bool settled = false;  // scratch sized for the store
  for (;;) {
    const Connection::Incoming in = connection.receive();
    InFlight in_flight(*this);
    try {
      // Only pushes queue behind a deferred reply; anything else is answered after those.
      if (scratch.replier != nullptr && in.type != proto::kPush) {
        scratch.replier->drain();
      }
      if (!settled && configured()) {
        scratch.buffer.resize(max_shard_size_ * (1 + store_->slot_suffixes().size()));
        if (options_.sync.sync_replicas) start_replier(connection, scratch);
        settled = true;
      }
      handle(connection, in, scratch);
    } catch (const TransportError&) {
      throw;
    } catch (const proto::ShortMeta& error) {
      throw FrameError(fmt::format("bad frame of type {} from {}: {}", in.type, connection.peer(),
                                   error.what()));
    } catch (const Error& error) {
      // A request the store refuses (a shard held elsewhere, a worker id out of range): the peer
      // is told why and the connection stays usable.
      spdlog::warn("ps{}: refused a request from {}: {}", options_.ps, connection.peer(),
                   error.what());
      send_ps_error(connection, fmt::format("ps{}: {}", options_.ps, error.what()));
    }
  }
}

void PsService::handle(Connection& connection, const Connection::Incoming& in, Scratch& scratch) {
  if (in.type == proto::kSettings) return settings(connection, in);
  if (!configured()) {
    if (in.tensor_bytes > 0) connection.discard_tensors();
    throw Error(fmt::format(
        "{} sent a request of type {} before this task learnt from the chief what the job "
        "trains (a worker says its settings first)",
        connection.peer(), in.type));
  }
  switch (in.type) {
    case proto::kHello:
      return hello(connection, in, scratch);
    case proto::kInit:
      return init(connection, in, scratch);
    case proto::kWaitReady:
      return wait_ready(connection, in, scratch);
    case proto::kPull:
      return pull(connection, /*with_slots=*/false, scratch);
    case proto::kPullState:
      return pull(connection, /*with_slots=*/true, scratch);
    case proto::kPush:
      return push(connection, in, scratch);
    case proto::kWorkerDone:
      return worker_done(connection, in, scratch);
    case proto::kCounters:
      return send_counters(connection, proto::kCountersReply, in.request_id, scratch);
    case proto::kWorkerFailed:
      return worker_failed(connection, in);
    case proto::kClaimWorker:
      return claim_worker(connection, in, scratch);
    default:
      throw FrameError(fmt::format("bad frame from {}: unknown type {} for a ps task",
                                   connection.peer(), in.type));
  }
}

void PsService::check_own_worker(const Connection& connection, int worker, const Scratch& scratch,
                                 const char* what) const {
  if (worker == scratch.worker && worker >= 0) return;
  throw Error(scratch.worker < 0
                  ? fmt::format("{} sent {} as worker {} without saying hello as that worker",
                                connection.peer(), what, worker)
                  : fmt::format("{} sent {} as worker {} on the connection of worker {}",
                                connection.peer(), what, worker, scratch.worker));
}

size_t PsService::held_shard(uint32_t shard) const {
  if (shard >= options_.map.shards.size() || options_.map.shards[shard].ps != options_.ps) {
    throw Error(fmt::format("shard {} is not held by this task", shard));
  }
  return shard;
}

void PsService::hello(Connection& connection, const Connection::Incoming& in, Scratch& scratch) {
  proto::MetaReader r(in.meta);
  const auto fingerprint = r.get<uint64_t>();
  const auto worker = r.get<int32_t>();
  if (fingerprint != fingerprint_) {
    roster_->refused(worker, connection.address(),
                     "had another model or partition than this ps task");
    throw Error(fmt::format(
        "{} has another model or partition than this ps task (fingerprint {:016x}, ours "
        "{:016x}): start every task with the same --model, --hidden_units, --placement, "
        "--min_shard_bytes and cluster",
        connection.peer(), fingerprint, fingerprint_));
  }
  if (worker >= options_.sync.total_num_replicas) {
    throw Error(fmt::format("{} says it is worker {}; this task expects workers 0..{}",
                            connection.peer(), worker, options_.sync.total_num_replicas - 1));
  }
  // Who a connection is was proved in its handshake; a hello can only repeat it.
  if (worker >= 0 && connection.peer_identity() != proto::worker_identity(worker)) {
    throw Error(fmt::format("{} says hello as worker {} but connected as \"{}\"", connection.peer(),
                            worker, connection.peer_identity()));
  }
  if (scratch.worker >= 0 && worker != scratch.worker) {
    throw Error(fmt::format("{} said hello as worker {} and now as worker {}", connection.peer(),
                            scratch.worker, worker));
  }
  if (worker >= 0 && scratch.worker < 0) {
    scratch.worker = worker;
    roster_->connected(worker, connection.address());
  }
  uint64_t next_sequence = 0;
  if (worker >= 0) {
    for (size_t shard : store_->shards())
      next_sequence = std::max(next_sequence, store_->next_sequence(shard, worker));
  }
  proto::MetaWriter& meta = scratch.meta;
  meta.clear();
  const int64_t step = store_->shards().empty() ? 0 : store_->reported_step();
  meta.put(static_cast<int32_t>(options_.ps))
      .put(static_cast<uint8_t>(store_->initialized()))
      .put(next_sequence)
      .put(step)
      .put(instance_)
      .put(restored_step_.load());
  connection.send(proto::kHelloReply, in.request_id, meta.bytes(), {});
}

void PsService::start_replier(Connection& connection, Scratch& scratch) {
  if (scratch.replier == nullptr)
    scratch.replier = &scratch.own_replier.emplace(*reply_context_, connection, max_shard_size_);
}

void PsService::init(Connection& connection, const Connection::Incoming& in, Scratch& scratch) {
  proto::MetaReader r(in.meta);
  const auto shard = r.get<uint32_t>();
  const auto step = r.get<int64_t>();
  const auto slots = r.get<uint32_t>();
  try {
    held_shard(shard);
    // Only the chief's process sets the variables, and a shard once: a retry of that same
    // process's init (its connection broke halfway) is let through, anyone else's is refused.
    check_own_worker(connection, kChief, scratch, "an init");
    {
      std::lock_guard lock(init_mutex_);
      if (initialized_by_ && *initialized_by_ != connection.peer_incarnation()) {
        throw Error(fmt::format(
            "{} sent an init of shard {}, which another process of the chief initialised "
            "already",
            connection.peer(), shard));
      }
    }
    if (step > proto::kMaxStep) {  // below 0: the store refuses it, saying so
      throw Error(fmt::format("init of shard {} at step {}: over the largest step, {}", shard, step,
                              proto::kMaxStep));
    }
    if (slots != 0 && slots != store_->slot_suffixes().size()) {
      throw Error(fmt::format("init of shard {} carries {} optimizer slots; this task keeps {}",
                              shard, slots, store_->slot_suffixes().size()));
    }
  } catch (const Error&) {
    connection.discard_tensors();
    throw;
  }
  const size_t size = store_->shard_size(shard);
  std::vector<std::span<float>> into;
  for (size_t k = 0; k <= slots; ++k)
    into.push_back(std::span(scratch.buffer).subspan(k * size, size));
  connection.receive_tensors(into);
  std::vector<std::span<const float>> slot_values(into.begin() + 1, into.end());
  // Before the store wakes the workers waiting for the variables: their next hello reads it.
  restored_step_ = step;
  store_->initialize(shard, into[0], step, slot_values);
  {
    std::lock_guard lock(init_mutex_);
    initialized_by_ = connection.peer_incarnation();
  }
  scratch.meta.clear();
  scratch.meta.put(shard);
  connection.send(proto::kAck, in.request_id, scratch.meta.bytes(), {});
}

void PsService::wait_ready(Connection& connection, const Connection::Incoming& in,
                           Scratch& scratch) {
  proto::MetaReader r(in.meta);
  // A peer's wait holds this connection's thread, which a shutdown joins: bounded here, whatever
  // it asks (a worker asks again), and ended sooner by the end of training or a stop.
  const auto timeout_ms = std::min(r.get<uint32_t>(), proto::kMaxReadyWaitMs);
  const bool ready = store_->wait_initialized(std::chrono::steady_clock::now() +
                                              std::chrono::milliseconds(timeout_ms));
  scratch.meta.clear();
  scratch.meta.put(static_cast<uint8_t>(ready));
  connection.send(proto::kReady, in.request_id, scratch.meta.bytes(), {});
}

void PsService::pull(Connection& connection, bool with_slots, Scratch& scratch) {
  if (!with_slots) {
    for (size_t shard : store_->shards()) {
      send_shard_values(*store_, connection, proto::kValues, 0, static_cast<uint32_t>(shard),
                        /*outcome=*/0, scratch.buffer, scratch.meta);
    }
    return;
  }
  const size_t slots = store_->slot_suffixes().size();
  for (size_t shard : store_->shards()) {
    const size_t size = store_->shard_size(shard);
    std::vector<std::span<const float>> tensors;
    const int64_t step = store_->read(shard, std::span(scratch.buffer).first(size));
    tensors.push_back(std::span(scratch.buffer).first(size));
    for (size_t k = 0; k < slots; ++k) {
      auto slot = std::span(scratch.buffer).subspan((k + 1) * size, size);
      store_->read_slot(shard, k, slot);
      tensors.push_back(slot);
    }
    scratch.meta.clear();
    proto::write(scratch.meta, shard_reply(*store_, static_cast<uint32_t>(shard), step));
    connection.send(proto::kState, 0, scratch.meta.bytes(), tensors);
  }
}

void PsService::check_push(const Connection& connection, const proto::PushMeta& m,
                           const Scratch& scratch) const {
  held_shard(m.shard);
  check_own_worker(connection, m.worker, scratch, "a push");
  if (m.computed_at_step < -proto::kMaxStep || m.computed_at_step > proto::kMaxStep) {
    throw Error(fmt::format("a push for shard {} computed at step {}: out of range", m.shard,
                            m.computed_at_step));
  }
  if (const auto reason = store_->aborted()) throw Error(*reason);
}

void PsService::push(Connection& connection, const Connection::Incoming& in, Scratch& scratch) {
  proto::MetaReader r(in.meta);
  const proto::PushMeta m = proto::read_push(r);
  try {
    check_push(connection, m, scratch);
  } catch (const Error&) {
    connection.discard_tensors();
    throw;
  }
  const std::span<float> into[] = {std::span(scratch.buffer).first(store_->shard_size(m.shard))};
  connection.receive_tensors(into);
  apply_push(connection, in.request_id, m, scratch);
}

void PsService::apply_push(Connection& connection, uint64_t request_id, const proto::PushMeta& m,
                           Scratch& scratch) {
  const size_t size = store_->shard_size(m.shard);
  const auto grad = std::span(scratch.buffer).first(size);
  const bool paced = pace_ && m.shard == store_->shards().front();
  // Sync: the worker's step began when the step before was applied, which its reply waited for.
  const auto step_began = paced && options_.sync.sync_replicas
                              ? store_->advanced_at(m.shard)
                              : std::chrono::steady_clock::time_point{};
  const PushResult result =
      options_.sync.sync_replicas
          ? store_->push_sync(m.shard, m.worker, m.sequence, m.computed_at_step, grad, m.lr)
          : store_->push_async(m.shard, m.worker, m.sequence, grad, m.lr);
  if (result.outcome == PushResult::Outcome::kRejected) {
    spdlog::warn(
        "ps{}: rejected worker {}'s gradient for shard {} at step {}: {} (the values are "
        "unchanged)",
        options_.ps, m.worker, m.shard, result.step,
        usable_learning_rate(m.lr)
            ? std::string("it holds a NaN or an infinity")
            : fmt::format("its learning rate {} is not a finite number of at least 0", m.lr));
  }
  // A worker's pace, from its pushes to ps0's first shard (a retried push is not a step).
  if (paced && result.outcome != PushResult::Outcome::kDuplicate)
    pace_->pushed(m.worker, std::chrono::steady_clock::now(), step_began);
  const bool counted = result.outcome == PushResult::Outcome::kAccepted ||
                       result.outcome == PushResult::Outcome::kDuplicate;
  const DeferredReply reply{.request_id = request_id,
                            .shard = m.shard,
                            .outcome = static_cast<uint8_t>(result.outcome),
                            .step = result.step,
                            .computed_at_step = m.computed_at_step,
                            // The token: the worker continues once this step has its R gradients.
                            .wait = options_.sync.sync_replicas && m.want_values && counted &&
                                    result.step == m.computed_at_step,
                            .want_values = m.want_values != 0,
                            .deadline = std::chrono::steady_clock::now() +
                                        std::chrono::milliseconds(options_.sync_wait_ms)};
  // Values by reference go to the replier when the worker's next request has arrived already
  // (the next shard of its round): this thread then copies and applies that one while the replier
  // copies these values into the worker, and one worker's round keeps two cores busy. With
  // nothing waiting, handing them over would only add a wake-up.
  const bool overlap =
      m.want_values && connection.link_traits().in_memory && connection.input_waiting();
  // (The link is chosen in the connection's first receive, so the replier starts here.)
  if (overlap) start_replier(connection, scratch);
  if (scratch.replier != nullptr && (reply.wait || overlap || !scratch.replier->idle())) {
    scratch.replier->defer(reply);
    return;
  }
  // The gradient is spent; its buffer takes the values.
  send_push_reply(*reply_context_, connection, reply, std::span(scratch.buffer).first(size),
                  scratch.meta, {});
}

void PsService::send_counters(Connection& connection, uint16_t type, uint64_t request_id,
                              Scratch& scratch) {
  proto::DoneReply reply;
  const ShardCounters total = task_counters(*store_);
  reply.applied = total.applied;
  reply.stale_dropped = total.stale_dropped;
  reply.duplicates = total.duplicates;
  reply.rejected = total.rejected;
  reply.step = total.step;
  reply.workers = store_->workers();
  if (pace_) {
    for (const WorkerPace::Totals& totals : pace_->totals())
      reply.worker_steps.push_back({.seconds = totals.seconds, .steps = totals.steps});
  }
  scratch.meta.clear();
  proto::write(scratch.meta, reply);
  connection.send(type, request_id, scratch.meta.bytes(), {});
}

void PsService::worker_failed(Connection& connection, const Connection::Incoming& in) {
  proto::MetaReader r(in.meta);
  const auto worker = r.get<int32_t>();
  const std::string why = r.rest_as_peer_text();
  if (worker < 0 || worker >= options_.sync.total_num_replicas) {
    throw Error(fmt::format("worker {} reported a failure; this task expects workers 0..{}", worker,
                            options_.sync.total_num_replicas - 1));
  }
  // Said before any hello (a worker that could not reach another ps): the handshake proved who.
  if (connection.peer_identity() != proto::worker_identity(worker)) {
    throw Error(fmt::format("{} reported a failure of worker {} but connected as \"{}\"",
                            connection.peer(), worker, connection.peer_identity()));
  }
  spdlog::error("ps{}: worker {} failed at step {}: {}", options_.ps, worker,
                store_->reported_step(), why);
  roster_->failed(worker, why);
}

void PsService::worker_done(Connection& connection, const Connection::Incoming& in,
                            Scratch& scratch) {
  proto::MetaReader r(in.meta);
  const auto worker = r.get<int32_t>();
  const auto finished = r.get<uint8_t>();
  if (worker < 0 || worker >= options_.sync.total_num_replicas) {
    throw Error(fmt::format("worker {} reported done; this task expects workers 0..{}", worker,
                            options_.sync.total_num_replicas - 1));
  }
  check_own_worker(connection, worker, scratch, "a done report");
  // Sync: the last step is done, so a step still short of its R gradients never gets them;
  // release the backups waiting on it.
  if (finished) store_->finish();

  send_counters(connection, proto::kDoneReply, in.request_id, scratch);
  if (!finished) {
    // Stopped by a signal before the end: it may come back (a rescheduled pod), so it is as good
    // as lost when its connections close, not done.
    spdlog::info("ps{}: worker {} is stopping before the end of training, at step {}", options_.ps,
                 worker, store_->reported_step());
    roster_->stopping(worker);
    return;
  }
  roster_->done(worker);
}

void PsService::claim_worker(Connection& connection, const Connection::Incoming& in,
                             Scratch& scratch) {
  if (options_.ps != 0) throw Error("a worker joins a running job through ps0, not this task");
  if (!roster_->takes_joiners()) {
    throw Error(fmt::format(
        "this job takes no joining workers: start its ps tasks with --max_workers above its {} "
        "workers (async only)",
        options_.sync.total_num_replicas));
  }
  const int worker = roster_->claim(connection.peer_incarnation());
  proto::MetaWriter& meta = scratch.meta;
  meta.clear();
  meta.put(static_cast<int32_t>(worker))
      .put(static_cast<int32_t>(options_.planned_workers))
      .put_string(options_.ps_hosts);
  connection.send(proto::kClaimReply, in.request_id, meta.bytes(), {});
  spdlog::info("ps{}: {} joins the job as worker {}", options_.ps, connection.peer(), worker);
}

}  // namespace dtrain
