// The coordinator's state machine. Each worker's connection has its handler thread (comm/server.h),
// which reads the worker's frames and calls in under one mutex; every answer is sent under that
// mutex too, so a worker hears the coordinator's frames in the order it decided them. A thread of
// its own wakes to enforce the deadlines.
#include "cluster/membership_service.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "base/peer_text.h"
#include "cluster/cluster_spec.h"
#include "cluster/membership_view.h"
#include "comm/connection.h"
#include "comm/server.h"

namespace dtrain {
namespace {

using nlohmann::json;
namespace proto = membership_protocol;
using Clock = std::chrono::steady_clock;

std::span<const std::byte> bytes_of(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

json parse_meta(const Connection::Incoming& in, const Connection& from) {
  try {
    return json::parse(in.meta.begin(), in.meta.end());
  } catch (const json::exception& error) {
    throw FrameError(fmt::format("membership: a malformed frame from {}: {}", from.peer(),
                                 peer_text(error.what())));
  }
}

// Where two workers' settings differ, as "/model: \"mlp\" here, \"softmax\" in the job"; at most
// three places, the first found in key order.
void differences(const json& mine, const json& job, const std::string& path,
                 std::vector<std::string>& out) {
  if (out.size() >= 3 || mine == job) return;
  if (mine.is_object() && job.is_object()) {
    std::vector<std::string> keys;
    for (const auto& [key, value] : mine.items()) keys.push_back(key);
    for (const auto& [key, value] : job.items())
      if (!mine.contains(key)) keys.push_back(key);
    for (const std::string& key : keys) {
      differences(mine.value(key, json()), job.value(key, json()), path + "/" + key, out);
    }
    return;
  }
  out.push_back(fmt::format("{}: {} here, {} in the job", path.empty() ? "/" : path,
                            peer_text(mine.dump()), peer_text(job.dump())));
}

}  // namespace

class MembershipService::Coordinator {
 public:
  explicit Coordinator(const MembershipOptions& o) : o_(o) {
    if (o.min_workers < 1 || o.min_workers > o.workers || o.workers > o.max_workers) {
      throw UsageError(fmt::format(
          "membership: need 1 <= --min_workers ({}) <= --workers ({}) <= --max_workers ({})",
          o.min_workers, o.workers, o.max_workers));
    }
    deadline_ = Clock::now() + std::chrono::milliseconds(o.timeout_ms);
    ServerOptions server;
    server.bind_host = o.bind_host;
    server.port = o.port;
    server.secret = o.secret;
    server.connection.authenticate_frames = o.authenticate_frames;
    server.connection.tcp_congestion = o.tcp_congestion;
    server.connection.type_carries_tensors = proto::carries_no_tensors;
    server.connection.identity = "coordinator";
    server_ = std::make_unique<Server>(std::move(server),
                                       [this](Connection& connection) { serve(connection); });
    timer_ = std::thread([this] { watch_deadlines(); });
  }

  ~Coordinator() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    timer_.join();
    server_->stop();
  }

  uint16_t port() const { return server_->port(); }
  uint64_t views() const {
    std::lock_guard lock(mutex_);
    return view_;
  }

 private:
  struct Ready {
    uint64_t in_view = 0;
    int64_t step = -1;
    HostPort address;
  };
  struct Session {
    // Valid while the session's handler runs, and the session is taken out before it returns
    // (SessionScope): every use is under mutex_, so no thread reaches a connection the server
    // has freed.
    Connection* connection = nullptr;
    std::optional<Ready> ready;
    Clock::time_point admitted_at;
  };

  // An admitted worker's session lives exactly as long as its handler: whatever ends the handler
  // (a leave, a closed connection, any exception) ends the session under the mutex before the
  // server frees the connection.
  class SessionScope {
   public:
    SessionScope(Coordinator& coordinator, Connection& connection)
        : coordinator_(coordinator), connection_(connection) {}
    ~SessionScope() {
      if (!name.empty()) coordinator_.end_session(name, connection_, why);
    }
    SessionScope(const SessionScope&) = delete;
    SessionScope& operator=(const SessionScope&) = delete;
    std::string name;  // once admitted
    std::string why = "its connection to the coordinator closed: the process ended";

   private:
    Coordinator& coordinator_;
    Connection& connection_;
  };

  // One worker's connection, on its own thread, until it closes.
  void serve(Connection& connection) {
    SessionScope scope(*this, connection);
    try {
      scope.name = hello(connection);
      if (scope.name.empty()) return;
      follow(connection, scope.name);
    } catch (const json::exception& error) {
      scope.why = fmt::format("it sent a malformed frame: {}", peer_text(error.what()));
      throw FrameError(fmt::format("membership: a malformed frame from {}: {}", connection.peer(),
                                   peer_text(error.what())));
    } catch (const TransportError& error) {
      // Closed by the peer, or by the coordinator itself as it let this worker go.
      if (connection.closed_by_peer()) return;
      if (!scope.name.empty() && !holds_session(scope.name, connection)) return;
      scope.why = fmt::format("its connection to the coordinator failed: {}", error.what());
      throw;
    } catch (const std::exception& error) {
      scope.why = fmt::format("its session failed: {}", error.what());
      throw;
    }
  }

  // The worker's name once admitted; empty when refused.
  std::string hello(Connection& connection) {
    const Connection::Incoming in = connection.receive();
    if (in.type != proto::kHello) {
      throw FrameError(fmt::format("membership: {} opened with frame type {}, not a hello",
                                   connection.peer(), in.type));
    }
    const json meta = parse_meta(in, connection);
    const std::string name = peer_text(meta.at("name").get<std::string>());
    return admit(connection, name, meta.at("settings")) ? name : std::string();
  }

  // Its reports, until it leaves.
  void follow(Connection& connection, const std::string& name) {
    for (;;) {
      const Connection::Incoming in = connection.receive();
      const json m = parse_meta(in, connection);
      if (in.type == proto::kReady) {
        ready(name, Ready{m.at("view").get<uint64_t>(), m.at("step").get<int64_t>(),
                          parse_host_port("membership: a ready worker's address",
                                          peer_text(m.at("address").get<std::string>()))});
      } else if (in.type == proto::kLeave) {
        leave(name, connection, m.at("step").get<int64_t>(),
              peer_text(m.at("why").get<std::string>()), m.value("finished", false));
        return;
      } else {
        throw FrameError(fmt::format("membership: unexpected frame type {} from {}", in.type,
                                     connection.peer()));
      }
    }
  }

  bool admit(Connection& connection, const std::string& name, const json& settings) {
    std::lock_guard lock(mutex_);
    std::string refusal;
    if (over_) {
      refusal = finished_ ? too_late(name) : fmt::format("the job has failed: {}", failure_);
    } else if (!member_index(name)) {
      refusal = fmt::format(
          "'{}' is not a worker's name: a job's name, then a task index below {} (\"worker3\")",
          name, kMaxMemberIndex);
    } else if (sessions_.contains(name)) {
      refusal = fmt::format("{} is in the job already (connected from {})", name,
                            sessions_[name].connection->peer());
    } else if (view_ > 0 && static_cast<int>(sessions_.size()) >= o_.max_workers) {
      refusal = fmt::format("the job has its --max_workers {} workers", o_.max_workers);
    } else if (!settings_.is_null() && settings != settings_) {
      std::vector<std::string> found;
      differences(settings, settings_, "", found);
      refusal = fmt::format("{} trains otherwise than the job: {}", name, fmt::join(found, "; "));
    }
    if (!refusal.empty()) {
      send(connection, proto::kRefused, {{"error", refusal}, {"ended", finished_}});
      spdlog::warn("membership: refused {} from {}: {}", name, connection.peer(), refusal);
      return false;
    }
    if (settings_.is_null()) settings_ = settings;
    sessions_[name] = Session{&connection, std::nullopt, Clock::now()};
    // Its steps are counted as the job's --workers take them, whatever number it was started in.
    // The members are interrupted only once it reports ready: a joiner that never does costs
    // them nothing (and is dropped at its join deadline).
    send(connection, proto::kWelcome, {{"workers", o_.workers}, {"min_workers", o_.min_workers}});
    return true;
  }

  void ready(const std::string& name, const Ready& r) {
    std::lock_guard lock(mutex_);
    const auto session = sessions_.find(name);
    if (session == sessions_.end()) return;
    if (over_) {
      tell_over(name, *session->second.connection);
      return;
    }
    session->second.ready = r;
    if (!forming_) {
      start_forming(member(name) ? fmt::format("{} lost its ring", name)
                                 : fmt::format("{} asks to join", name));
    }
    settle();
  }

  // A worker leaves for itself alone: a finished leave ends the job only from a member of the
  // current view (every member reaches the end at the same step); from anyone else, it is a leave.
  void leave(const std::string& name, const Connection& connection, int64_t step,
             const std::string& why, bool finished) {
    std::lock_guard lock(mutex_);
    if (!take_session(name, connection) || over_) return;
    if (!member(name)) {
      settle();  // a joiner gone: nobody waits for it
      return;
    }
    if (finished) {
      finish(name, step);
      return;
    }
    changes_.push_back({name, "left", step, why});
    if (!forming_) start_forming(fmt::format("{} left", name));
    settle();
  }

  void end_session(const std::string& name, const Connection& connection, const std::string& why) {
    std::lock_guard lock(mutex_);
    // At the coordinator's own stop every session ends: that is no change of the job.
    if (!take_session(name, connection) || over_ || stopping_) return;
    if (member(name)) {
      changes_.push_back({name, "was lost", -1, why});
      if (!forming_) start_forming(fmt::format("{} was lost", name));
    }
    settle();
  }

  bool holds_session(const std::string& name, const Connection& connection) const {
    std::lock_guard lock(mutex_);
    const auto session = sessions_.find(name);
    return session != sessions_.end() && session->second.connection == &connection;
  }

  // Whether `name`'s session is this connection's (a name dropped and admitted again belongs to
  // its new connection), taking it out if so. REQUIRES: mutex_ held, as for everything below.
  bool take_session(const std::string& name, const Connection& connection) {
    const auto session = sessions_.find(name);
    if (session == sessions_.end() || session->second.connection != &connection) return false;
    sessions_.erase(session);
    return true;
  }

  bool member(const std::string& name) const {
    return std::find(order_.begin(), order_.end(), name) != order_.end();
  }

  void start_forming(const std::string& why) {
    forming_ = true;
    deadline_ = Clock::now() + std::chrono::milliseconds(o_.timeout_ms);
    // Only members have rings to interrupt; a joiner waits for its view anyway.
    for (auto& [name, session] : sessions_) {
      if (member(name))
        send(*session.connection, proto::kChange, {{"view", view_ + 1}, {"why", why}});
    }
  }

  // Issues the next view once every member still connected has reported ready (the first: once
  // --workers have), or at the deadline with those that have. Joiners come in if they have
  // reported by then; one that has not is never waited for.
  void settle() {
    if (!forming_ || over_) return;
    int ready = 0;
    int members_waited = 0;
    for (const auto& [name, session] : sessions_) {
      ready += session.ready.has_value();
      members_waited += !session.ready && member(name);
    }
    const bool late = Clock::now() >= deadline_;
    const bool complete = view_ == 0 ? ready >= o_.workers : members_waited == 0 && ready > 0;
    if (!complete && !late) return;
    if (late) drop_unready();
    issue(ready);
  }

  // The members that have not reported by the deadline (at the start, every worker that has not)
  // are dropped as lost, and told: one that is alive after all joins again as a worker without a
  // state (DroppedFromJob) rather than train on in a view that is no longer the job's.
  void drop_unready() {
    const std::string since = view_ == 0 ? std::string("the job's start")
                                         : fmt::format("the change to view {} began", view_ + 1);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      const auto& [name, session] = *it;
      if (session.ready || (view_ > 0 && !member(name))) {
        ++it;
        continue;
      }
      const std::string why = fmt::format("no report within {} s", o_.timeout_ms / 1000.0);
      if (member(name)) changes_.push_back({name, "was lost", -1, why});
      spdlog::warn("membership: dropped {}: {} after {}", name, why, since);
      send(*session.connection, proto::kRefused,
           {{"error", fmt::format("{} was dropped from the job: {} after {}", name, why, since)},
            {"dropped", true}});
      session.connection->close();
      it = sessions_.erase(it);
    }
  }

  void issue(int ready) {
    if (ready < o_.min_workers) {
      int64_t at = -1;
      for (const auto& [name, session] : sessions_)
        if (session.ready) at = std::max(at, session.ready->step);
      std::vector<std::string> lines;
      for (const Change& change : changes_) lines.push_back(change.line(at));
      const std::string what = lines.empty() ? std::string(view_ == 0 ? "the job's start" : "")
                                             : fmt::format("{}", fmt::join(lines, "; "));
      fail(fmt::format("{}: {} worker(s) remain, fewer than --min_workers {}", what, ready,
                       o_.min_workers));
      return;
    }
    // The members that stay keep their order, so rank 0 stays rank 0 while it lives; joiners
    // follow by task index.
    std::vector<std::string> order;
    for (const std::string& name : order_) {
      const auto session = sessions_.find(name);
      if (session != sessions_.end() && session->second.ready) order.push_back(name);
    }
    std::vector<std::string> joiners;
    for (const auto& [name, session] : sessions_)
      if (session.ready && !member(name)) joiners.push_back(name);
    // Checked names (admit): every one has its index.
    std::sort(joiners.begin(), joiners.end(), [](const std::string& a, const std::string& b) {
      return member_index(a).value_or(0) < member_index(b).value_or(0);
    });
    order.insert(order.end(), joiners.begin(), joiners.end());

    json view = {{"id", view_ + 1}, {"source", 0}, {"fresh", true}};
    int64_t furthest = -1;
    for (size_t r = 0; r < order.size(); ++r) {
      const Ready& in = *sessions_[order[r]].ready;
      view["members"].push_back(
          {{"name", order[r]}, {"address", in.address.to_string()}, {"step", in.step}});
      if (in.step > furthest) {
        furthest = in.step;
        view["source"] = r;
      }
    }
    view["fresh"] = furthest < 0;
    if (view_ > 0) {
      for (const std::string& name : joiners) changes_.push_back({name, "joined", furthest, ""});
    }
    view["changes"] = json::array();
    for (const Change& change : changes_) view["changes"].push_back(change.line(furthest));
    ++view_;
    forming_ = false;
    changes_.clear();
    order_ = order;
    // A joiner that has not reported is not in it, and waits for a view that is.
    for (const std::string& name : order) {
      Session& session = sessions_[name];
      session.ready.reset();
      send(*session.connection, proto::kView, view);
    }
  }

  // A member reached the end of training: so does every member, at the same step. Whoever waits
  // to join came too late, and hears it now.
  void finish(const std::string& name, int64_t step) {
    over_ = true;
    finished_ = true;
    ending_ =
        fmt::format("the job finished at step {} ({} reached the end of its training)", step, name);
    for (auto& [other, session] : sessions_)
      if (!member(other)) tell_over(other, *session.connection);
  }

  std::string too_late(const std::string& name) const {
    return fmt::format("{} came too late to join: {}; nothing is left to do", name,
                       ending_.empty() ? std::string("the job has finished") : ending_);
  }

  void tell_over(const std::string& name, Connection& connection) {
    if (finished_) {
      // A member that reports after the end was stopped in its last step by a joiner's change.
      const std::string error = member(name) ? ending_ : too_late(name);
      send(connection, proto::kRefused, {{"error", error}, {"ended", true}});
    } else {
      send(connection, proto::kFailed, {{"error", failure_}});
    }
  }

  void fail(const std::string& error) {
    over_ = true;
    failure_ = error;
    spdlog::error("membership: {}", error);
    for (auto& [name, session] : sessions_)
      send(*session.connection, proto::kFailed, {{"error", error}});
  }

  // A worker gone meanwhile makes its own handler end its session; nothing to do here.
  static void send(Connection& connection, uint16_t type, const json& meta) {
    try {
      connection.send(type, 0, bytes_of(meta.dump()), {});
    } catch (const TransportError&) {
    }
  }

  // A joiner that said hello and has not reported ready within the timeout holds a name and a
  // place under --max_workers for nothing: it is told, and let go.
  void drop_stalled_joiners(Clock::time_point now) {
    if (view_ == 0) return;  // the first view's own deadline
    const auto limit = std::chrono::milliseconds(o_.timeout_ms);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      const auto& [name, session] = *it;
      if (session.ready || member(name) || now - session.admitted_at < limit) {
        ++it;
        continue;
      }
      const std::string why =
          fmt::format("{} said hello but did not report ready within {} s; start it again to join",
                      name, o_.timeout_ms / 1000.0);
      spdlog::warn("membership: {}", why);
      send(*session.connection, proto::kRefused, {{"error", why}});
      session.connection->close();
      it = sessions_.erase(it);
    }
  }

  void watch_deadlines() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      wake_.wait_for(lock, std::chrono::milliseconds(100));
      if (stopping_ || over_) continue;
      const auto now = Clock::now();
      drop_stalled_joiners(now);
      if (forming_ && now >= deadline_) settle();
    }
  }

  const MembershipOptions o_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  json settings_;  // the first worker's: everyone's must equal them
  std::map<std::string, Session> sessions_;
  std::vector<std::string> order_;  // the last view's members, in rank order
  uint64_t view_ = 0;               // the last view issued
  bool forming_ = true;             // the first view forms from the start
  Clock::time_point deadline_;
  // What changed since the last view: "worker1 left at step 412 (SIGTERM)". A loss is dated by
  // the step the job goes on from, known when the view forms.
  struct Change {
    std::string name;
    std::string what;   // "left", "was lost", "joined"
    int64_t step = -1;  // -1: the next view's
    std::string why;
    std::string line(int64_t view_step) const {
      const std::string at =
          fmt::format("{} {} at step {}", name, what, step >= 0 ? step : view_step);
      return why.empty() ? at : fmt::format("{} ({})", at, why);
    }
  };
  std::vector<Change> changes_;
  bool over_ = false;               // finished or failed
  bool finished_ = false;           // ... finished: a member reached the end of training
  std::string ending_;              // how it finished
  std::string failure_;             // why it failed
  std::unique_ptr<Server> server_;  // last among the members: its handlers use them
  std::thread timer_;
};

MembershipService::MembershipService(const MembershipOptions& options)
    : coordinator_(std::make_unique<Coordinator>(options)) {}

MembershipService::~MembershipService() = default;

uint16_t MembershipService::port() const { return coordinator_->port(); }

uint64_t MembershipService::views() const { return coordinator_->views(); }

}  // namespace dtrain
