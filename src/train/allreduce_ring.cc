// How an all-reduce worker follows an elastic job's membership (docs/elastic.md): it forms its ring
// from each view the job's coordinator settles, and when the ring fails or a change interrupts it,
// forms the next one. What the strategy does over each new ring — dropping the step under way and
// taking, with every other member, the state of the member furthest along — is in
// allreduce_elastic.cc.
#include "train/allreduce_ring.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <utility>

#include "base/error.h"
#include "cluster/bind_address.h"

namespace dtrain {

AllreduceRing::AllreduceRing(const TrainConfig& train, const AllreduceClusterConfig& config,
                             std::unique_ptr<RingConnector> connector, nlohmann::json settings,
                             std::ostream& out)
    : c_(train),
      config_(config),
      out_(out),
      rank_(worker_rank(config.cluster.cluster, config.cluster.task)),
      workers_(training_workers(config.cluster.cluster)),
      planned_workers_(static_cast<int>(workers_.size())),
      connector_(std::move(connector)) {
  if (!config.coordinator) return;
  // The job's coordinator admits this worker on what it trains, and says how many workers the
  // job's steps are counted by (its --workers: a worker that joins later was started alone).
  membership_options_ =
      MembershipClientOptions{.coordinator = *config.coordinator,
                              .secret = config.secret,
                              .authenticate_frames = config.cluster.authenticate_frames,
                              .tcp_congestion = config.cluster.tcp_congestion,
                              .name = name(),
                              .settings = std::move(settings),
                              .timeout_ms = config.collective_timeout_ms};
  membership_ = std::make_unique<MembershipClient>(membership_options_);
  planned_workers_ = membership_->planned_workers();
}

AllreduceRing::~AllreduceRing() = default;

int AllreduceRing::size() const {
  return elastic() && view_.id > 0 ? view_.size() : static_cast<int>(workers_.size());
}

int AllreduceRing::fewest_workers() const {
  return elastic() ? membership_->min_workers() : size();
}

// An elastic job's worker keeps its task's name whatever its rank.
std::string AllreduceRing::name() const {
  if (!config_.member_name.empty()) return config_.member_name;
  if (config_.coordinator) {
    return fmt::format("{}{}", config_.cluster.task.job, config_.cluster.task.index);
  }
  return name_of(rank_);
}

std::string AllreduceRing::name_of(int rank) const {
  if (elastic() && rank >= 0 && rank < view_.size())
    return view_.members[static_cast<size_t>(rank)].name;
  return fmt::format("{}{}", rank_prefix(), rank);
}

int AllreduceRing::member_index() const {
  // The coordinator admits no other name, and this worker's own comes from its flags.
  return dtrain::member_index(name()).value_or(0);
}

std::string AllreduceRing::describe() const {
  if (!elastic()) return fmt::format("allreduce, {} workers", size());
  return fmt::format("allreduce, {} workers (elastic: the job's coordinator at {})", size(),
                     config_.coordinator->to_string());
}

void AllreduceRing::agree_on(uint64_t fingerprint) {
  fingerprint_ = fingerprint;
  if (elastic()) return;
  const ClusterSpec& cluster = config_.cluster.cluster;
  const HostPort& own = cluster.address(config_.cluster.task);
  if (connector_->has_address()) {
    const BindAddress bind = bind_address_for(own, config_.cluster.bind_host);
    fmt::print(out_, "worker={}: listening on {}:{} ({})\n", rank_, bind.host, own.port, bind.why);
  }
  const TaskId& right = workers_[static_cast<size_t>((rank_ + 1) % size())];
  connector_->listen(options(size(), rank_, cluster.address(right)));
}

void AllreduceRing::connect() {
  ring_ = connector_->connect();
  connector_.reset();
  communicator_ = std::make_unique<Communicator>(
      *ring_, CollectiveOptions{.max_chunk_bytes = config_.chunk_bytes});
}

void AllreduceRing::join(int64_t step, bool have_state, const Formed& formed) {
  const HostPort& own = config_.cluster.cluster.address(config_.cluster.task);
  for (;;) {
    communicator_.reset();
    ring_.reset();
    const MembershipView before = view_;
    try {
      view_ = membership_->next_view(have_state ? step : -1, own);
    } catch (const DroppedFromJob& dropped) {
      // The job went on without this worker: its state is no longer the job's, and it must not
      // train on as if it were. It comes back as a joiner, and takes the state of the members.
      fmt::print(out_, "{}: {}; joining the job again\n", name(), dropped.what());
      out_ << std::flush;
      membership_.reset();
      membership_ = std::make_unique<MembershipClient>(membership_options_);
      have_state = false;
      continue;
    }
    ++views_;
    const int rank = view_.rank_of(name());
    if (rank < 0) {
      throw Error(fmt::format("{}: the job's coordinator left this worker out of view {}", name(),
                              view_.id));
    }
    rank_ = rank;
    // The view is settled whether or not its ring forms: what changed is said now.
    print_changes(view_, before);
    try {
      const HostPort& right = view_.members[static_cast<size_t>((rank_ + 1) % size())].address;
      std::unique_ptr<RingConnector> connector = tcp_ring_connector();
      connector->listen(options(size(), rank_, right));
      ring_ = connector->connect();
      communicator_ = std::make_unique<Communicator>(
          *ring_, CollectiveOptions{.max_chunk_bytes = config_.chunk_bytes});
      formed(view_, have_state);
    } catch (const CollectiveError& error) {
      fmt::print(out_, "{}: the ring of membership view {} did not form: {}\n", name(), view_.id,
                 error.what());
      out_ << std::flush;
      continue;
    }
    return;
  }
}

bool AllreduceRing::interrupted() const {
  return elastic() && membership_->interrupt().raised() > view_.id;
}

std::string AllreduceRing::interrupt_why() const { return membership_->interrupt().why(); }

void AllreduceRing::leave(int64_t step, const std::string& why, bool finished) {
  membership_->leave(step, why, finished);
}

void AllreduceRing::abort(const std::string& reason) {
  if (ring_) {
    ring_->abort(reason);
  } else if (connector_) {
    connector_->abort(reason);
  }
}

// Which way chunks travel on each link: the honest answer to "is this run using memory or TCP?"
void AllreduceRing::print_links(int name_index) {
  if (size() == 1) return;
  fmt::print(out_, "worker={}: transport to {} (left): {}; to {} (right): {}\n", name_index,
             name_of((rank_ + size() - 1) % size()), ring_->describe_link(Side::kLeft),
             name_of((rank_ + 1) % size()), ring_->describe_link(Side::kRight));
}

RingOptions AllreduceRing::options(int size, int rank, const HostPort& right) const {
  const HostPort& own = config_.cluster.cluster.address(config_.cluster.task);
  RingOptions options{.size = size,
                      .rank = rank,
                      .bind_host = bind_address_for(own, config_.cluster.bind_host).host,
                      .port = own.port,
                      .right = right,
                      .secret = config_.secret,
                      .authenticate_frames = config_.cluster.authenticate_frames,
                      .tcp_congestion = config_.cluster.tcp_congestion,
                      .fingerprint = fingerprint_,
                      .timeout_ms = config_.collective_timeout_ms,
                      .spin_us = ring_spin_us(workers_on_host(own.host), config_.transport),
                      .job = rank_prefix(),
                      .transport = config_.transport,
                      .stop = c_.stop,
                      .wait_report =
                          [this](const std::string& line) {
                            fmt::print(out_, "{}: {}\n", name(), line);
                            out_ << std::flush;
                          },
                      .stall_warning_ms = config_.stall_warning_ms,
                      .chief = chief(),
                      .interrupt = elastic() ? &membership_->interrupt() : nullptr,
                      .view = view_.id,
                      .names = elastic() ? view_.names() : std::vector<std::string>()};
  return options;
}

// How many workers of the cluster share this task's host (all of them, under the launcher).
int AllreduceRing::workers_on_host(const std::string& host) const {
  int here = 0;
  for (const TaskId& worker : workers_)
    here += config_.cluster.cluster.address(worker).host == host;
  return here;
}

// The ring names ranks "<prefix><rank>"; with no chief job that is the task's own name.
std::string AllreduceRing::rank_prefix() const {
  return config_.cluster.cluster.has_job(kChiefJob) ? "rank" : std::string(kWorkerJob);
}

void AllreduceRing::print_changes(const MembershipView& view, const MembershipView& before) {
  MembershipState next = members_.current();
  for (const std::string& change : view.changes) {
    fmt::print(out_, "{}: {}: {} workers now\n", name(), change, view.size());
    if (change.find(" joined at ") != std::string::npos) {
      ++next.joined;
    } else {
      ++next.left;
    }
  }
  next.version = view.id;
  next.workers = view.size();
  next.rank = rank_;
  members_.settle(next);
  if (before.id == 0 || before.names() != view.names()) {
    fmt::print(out_, "{}: membership view {}: rank {} of {} ({}){}\n", name(), view.id, rank_,
               view.size(), fmt::join(view.names(), ", "), chief() ? ", the chief" : "");
  }
  out_ << std::flush;
}

// Rank `root`'s parameters, optimizer slots, moving average and global step, on every rank, and
// an elastic job's position in the data (throws CollectiveError).
void broadcast_state(Communicator& communicator, TrainingState& state, int root,
                     DataPosition* position) {
  communicator.broadcast(state.params().flat(), root);
  for (ParamSet& slot : state.optimizer().slots()) communicator.broadcast(slot.flat(), root);
  if (MovingAverage* average = state.moving_average())
    communicator.broadcast(average->shadow().flat(), root);
  communicator.broadcast_bytes(std::as_writable_bytes(std::span(&state.step, 1)), root);
  if (position == nullptr) return;
  int64_t at[2] = {position->epoch, position->taken};
  communicator.broadcast_bytes(std::as_writable_bytes(std::span(at)), root);
  *position = {at[0], at[1]};
}

}  // namespace dtrain
