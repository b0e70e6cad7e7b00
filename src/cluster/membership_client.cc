// The worker's side: one sender (the training thread) and one receiver (the reader thread) on the
// connection, as comm/connection.h allows.
#include "cluster/membership_client.h"

#include <fmt/format.h>

#include "base/error.h"
#include "base/peer_text.h"
#include "cluster/cluster_spec.h"
#include "comm/connect.h"
#include "comm/connection.h"

namespace dtrain {
namespace {

using nlohmann::json;
namespace proto = membership_protocol;

void send_json(Connection& connection, uint16_t type, const json& meta) {
  const std::string text = meta.dump();
  connection.send(type, 0, std::as_bytes(std::span(text.data(), text.size())), {});
}

MembershipView view_of(const json& v) {
  MembershipView view;
  view.id = v.at("id").get<uint64_t>();
  view.source = v.at("source").get<int>();
  view.fresh = v.at("fresh").get<bool>();
  for (const json& m : v.at("members")) {
    view.members.push_back({peer_text(m.at("name").get<std::string>()),
                            parse_host_port("membership: a member's address",
                                            peer_text(m.at("address").get<std::string>())),
                            m.at("step").get<int64_t>()});
  }
  for (const json& line : v.at("changes"))
    view.changes.push_back(peer_text(line.get<std::string>()));
  if (view.members.empty() || view.source < 0 || view.source >= view.size()) {
    throw FrameError(
        fmt::format("membership: view {} names no member or a source outside it", view.id));
  }
  return view;
}

}  // namespace

MembershipClient::MembershipClient(MembershipClientOptions options) : options_(std::move(options)) {
  ConnectionOptions c;
  c.task_name = "the job's coordinator";  // its errors add the address
  c.identity = options_.name;
  c.connect_timeout_ms = options_.timeout_ms;
  c.authenticate_frames = options_.authenticate_frames;
  c.tcp_congestion = options_.tcp_congestion;
  c.type_carries_tensors = proto::carries_no_tensors;
  connection_ = connect(options_.coordinator.host, options_.coordinator.port, options_.secret, c);
  send_json(*connection_, proto::kHello,
            {{"name", options_.name}, {"settings", options_.settings}});
  const Connection::Incoming in = connection_->receive();
  try {
    const json meta = json::parse(in.meta.begin(), in.meta.end());
    if (in.type == proto::kRefused) {
      const std::string error = peer_text(meta.at("error").get<std::string>());
      if (meta.value("ended", false)) throw JobEnded(error);
      throw Error(fmt::format("refused by the job's coordinator: {}", error));
    }
    if (in.type != proto::kWelcome) {
      throw FrameError(fmt::format("the job's coordinator ({}) answered with frame type {}",
                                   options_.coordinator.to_string(), in.type));
    }
    planned_workers_ = meta.at("workers").get<int>();
    min_workers_ = meta.at("min_workers").get<int>();
  } catch (const json::exception& error) {
    throw FrameError(fmt::format("the job's coordinator ({}) sent a malformed welcome: {}",
                                 options_.coordinator.to_string(), peer_text(error.what())));
  }
  if (planned_workers_ < 1 || min_workers_ < 1 || min_workers_ > planned_workers_) {
    throw FrameError(fmt::format("the job's coordinator ({}) plans {} workers, at least {}",
                                 options_.coordinator.to_string(), planned_workers_, min_workers_));
  }
  reader_ = std::thread([this] { read_announcements(); });
}

MembershipClient::~MembershipClient() {
  closing_ = true;
  connection_->close();
  reader_.join();
}

MembershipView MembershipClient::next_view(int64_t step, const HostPort& address) {
  try {
    send_json(*connection_, proto::kReady,
              {{"view", in_view_}, {"step", step}, {"address", address.to_string()}});
  } catch (const TransportError& error) {
    // The coordinator may have said why before it closed: a refusal, or the job's failure.
    std::unique_lock lock(mutex_);
    arrived_.wait_for(lock, std::chrono::seconds(5), [&] { return !error_.empty(); });
    if (ended_) throw JobEnded(error_);
    if (dropped_) throw DroppedFromJob(error_);
    throw Error(!error_.empty() ? error_ : error.what());
  }
  std::unique_lock lock(mutex_);
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(options_.timeout_ms) +
                     std::chrono::seconds(10);  // the coordinator answers by its own deadline
  arrived_.wait_until(lock, until,
                      [&] { return !error_.empty() || (view_ && view_->id > in_view_); });
  if (ended_) throw JobEnded(error_);
  if (dropped_) throw DroppedFromJob(error_);
  if (!error_.empty()) throw Error(error_);
  if (!view_ || view_->id <= in_view_) {
    throw Error(fmt::format("{}: no membership view from the job's coordinator ({}) within {} s",
                            options_.name, options_.coordinator.to_string(),
                            options_.timeout_ms / 1000 + 10));
  }
  MembershipView view = std::move(*view_);
  view_.reset();
  in_view_ = view.id;
  return view;
}

void MembershipClient::leave(int64_t step, const std::string& why, bool finished) {
  try {
    send_json(*connection_, proto::kLeave, {{"step", step}, {"why", why}, {"finished", finished}});
  } catch (const TransportError&) {
    // A coordinator that is gone has nobody to tell.
  }
}

void MembershipClient::read_announcements() {
  try {
    for (;;) {
      const Connection::Incoming in = connection_->receive();
      const json meta = json::parse(in.meta.begin(), in.meta.end());
      if (in.type == proto::kChange) {
        interrupt_.raise(meta.at("view").get<uint64_t>(),
                         fmt::format("the job's membership is changing: {}",
                                     peer_text(meta.at("why").get<std::string>())));
      } else if (in.type == proto::kView) {
        MembershipView view = view_of(meta);
        std::lock_guard lock(mutex_);
        view_ = std::move(view);
        arrived_.notify_all();
      } else if (in.type == proto::kRefused &&
                 (meta.value("ended", false) || meta.value("dropped", false))) {
        {
          std::lock_guard lock(mutex_);
          ended_ = meta.value("ended", false);
          dropped_ = !ended_;
        }
        fail(peer_text(meta.at("error").get<std::string>()));
        return;
      } else if (in.type == proto::kRefused || in.type == proto::kFailed) {
        fail(fmt::format("{}: {}",
                         in.type == proto::kRefused ? "refused by the job's coordinator"
                                                    : "the job cannot go on",
                         peer_text(meta.at("error").get<std::string>())));
        return;
      } else {
        throw FrameError(fmt::format("unexpected frame type {}", in.type));
      }
    }
  } catch (const json::exception& error) {
    fail(fmt::format("the job's coordinator ({}) sent a malformed frame: {}",
                     options_.coordinator.to_string(), peer_text(error.what())));
  } catch (const TransportError& error) {
    // Whatever ended the link but this worker's own close is what its next view must say: a
    // frame that failed its tag (forged or altered on the way), a cut, the coordinator gone.
    if (!closing_) {
      fail(fmt::format("lost the job's coordinator: {}", error.what()));
    }
  } catch (const Error& error) {
    // A view this worker cannot use (a member's address that is none): the thread's boundary.
    fail(fmt::format("the job's coordinator ({}) sent a view this worker cannot use: {}",
                     options_.coordinator.to_string(), error.what()));
  }
}

void MembershipClient::fail(const std::string& error) {
  {
    std::lock_guard lock(mutex_);
    if (error_.empty()) error_ = error;
    arrived_.notify_all();
  }
  interrupt_.raise(UINT64_MAX, error);
}

}  // namespace dtrain
