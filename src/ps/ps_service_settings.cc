// What a ps task serves, settled: given when it starts, or learnt from the chief's kSettings (a
// TensorFlow ps started with only the cluster flags); and every worker's settings compared with it,
// so that a worker with another optimizer or sync mode is refused by name instead of trained
// wrongly.
#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <exception>
#include <new>
#include <string_view>
#include <system_error>

#include "base/error.h"
#include "base/json_depth.h"
#include "base/log.h"
#include "ps/job_settings.h"
#include "ps/ps_protocol.h"
#include "ps/ps_service.h"

namespace dtrain {

namespace proto = ps_protocol;

void PsService::configure(const PsRestoredState* restored) {
  settings_ =
      options_.settings.empty() ? nlohmann::json() : nlohmann::json::parse(options_.settings);
  fingerprint_ = partition_fingerprint(ParamSet(options_.specs), options_.map);
  store_ = std::make_unique<ShardStore>(options_.specs, options_.map, options_.ps,
                                        options_.optimizer, options_.sync);
  roster_ = std::make_unique<WorkerRoster>(options_, *store_);
  reply_context_.emplace(PushReplyContext{.store = *store_,
                                          .ps = options_.ps,
                                          .sync_wait_ms = options_.sync_wait_ms,
                                          .stall_warning_ms = options_.stall_warning_ms});
  for (size_t shard : store_->shards())
    max_shard_size_ = std::max(max_shard_size_, store_->shard_size(shard));
  if (options_.ps == 0 && !store_->shards().empty()) {
    pace_ = std::make_unique<WorkerPace>(
        options_.sync.total_num_replicas,
        [ps = options_.ps](const std::string& line) { spdlog::warn("ps{}: {}", ps, line); });
  }
  if (restored != nullptr) {
    initialize_from(restored->params, restored->slots, restored->step);
    restored_step_ = restored->step;
  }
  configured_.store(true, std::memory_order_release);
  if (options_.on_configured) options_.on_configured(options_);
}

bool PsService::wait_configured() {
  const auto report_interval = std::chrono::milliseconds(options_.wait_report_interval_ms);
  auto next_report = std::chrono::steady_clock::now() + report_interval;
  std::unique_lock lock(configure_mutex_);
  while (!configured()) {
    if (options_.stop != nullptr && options_.stop->requested()) return false;
    // The slice bounds how late a stop is noticed.
    configured_changed_.wait_for(lock, std::chrono::milliseconds(500));
    if (const auto now = std::chrono::steady_clock::now(); !configured() && now >= next_report) {
      spdlog::info("ps{}: still waiting for the chief (worker 0) to say what the job trains",
                   options_.ps);
      next_report = now + report_interval;
    }
  }
  return true;
}

namespace {

// The worker a handshake's identity names ("worker 3"), or -1.
int worker_named(const std::string& identity) {
  constexpr std::string_view kPrefix = "worker ";
  if (!identity.starts_with(kPrefix)) return -1;
  int worker = -1;
  const char* begin = identity.data() + kPrefix.size();
  const auto [end, error] = std::from_chars(begin, identity.data() + identity.size(), worker);
  return error == std::errc() && end == identity.data() + identity.size() ? worker : -1;
}

}  // namespace

void PsService::learn(const nlohmann::json& chief) {
  try {
    PsServiceOptions learnt = options_;
    std::optional<PsRestoredState> restored = options_.learn(chief, learnt);
    // Only what the job trains: the rest, which other connections read meanwhile, is this task's.
    options_.specs = std::move(learnt.specs);
    options_.map = std::move(learnt.map);
    options_.optimizer = std::move(learnt.optimizer);
    options_.sync = learnt.sync;
    options_.planned_workers = learnt.planned_workers;
    options_.min_workers = learnt.min_workers;
    options_.settings = std::move(learnt.settings);
    configure(restored ? &*restored : nullptr);
  } catch (...) {
    // Nothing of these settings stays (none of it is read before configured()): the chief may
    // say others.
    pace_.reset();
    reply_context_.reset();
    roster_.reset();
    store_.reset();
    max_shard_size_ = 0;
    try {
      throw;
    } catch (const std::bad_alloc&) {
      throw Error("the chief's model is larger than this task can hold in memory");
    }
  }
}

void PsService::settings(Connection& connection, const Connection::Incoming& in) {
  proto::MetaReader r(in.meta);
  const auto timeout_ms = std::min(r.get<uint32_t>(), proto::kMaxReadyWaitMs);
  // The JSON after it, parsed where it lies (never printed: a refusal quotes parsed values).
  const auto bytes = in.meta.subspan(sizeof(uint32_t));
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  // Copying, comparing and freeing a parsed value recurse once per level: a peer's million '['
  // must not reach the parser.
  if (const auto at = find_json_nesting_beyond(text, kMaxJsonNesting)) {
    throw Error(fmt::format("{} sent settings nested deeper than {} levels (at byte {})",
                            connection.peer(), kMaxJsonNesting, *at));
  }
  const nlohmann::json theirs = nlohmann::json::parse(text, nullptr, false);
  if (theirs.is_discarded() || !theirs.is_object()) {
    throw Error(fmt::format("{} sent settings that are not a JSON object", connection.peer()));
  }
  const int worker = worker_named(connection.peer_identity());
  {
    std::unique_lock lock(configure_mutex_);
    if (!configured() && worker == kChief) {
      learn(theirs);
      configured_changed_.notify_all();
    } else if (!configured()) {
      // Bounded, as kWaitReady is: the worker asks again.
      configured_changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                   [&] { return configured(); });
    }
  }
  if (configured() && !settings_.is_null()) {
    if (const auto difference = settings_difference(settings_, theirs)) {
      const std::string path = difference->substr(0, difference->find(' '));
      const std::string why = fmt::format(
          "trains with another {} than this task {}; start every task with the same {}, or "
          "the ps tasks with only the cluster flags, which then take the chief's",
          path, difference->substr(path.size() + 1), settings_flag(path));
      if (worker >= 0 && worker < options_.sync.total_num_replicas) {
        roster_->refused(
            worker, connection.address(),
            fmt::format("came with another {} {}", path, difference->substr(path.size() + 1)));
      }
      throw Error(fmt::format("{} {}", connection.peer(), why));
    }
  }
  proto::MetaWriter meta;  // once a connection: no scratch kept for it
  meta.put(static_cast<uint8_t>(configured()));
  connection.send(proto::kSettingsReply, in.request_id, meta.bytes(), {});
}

}  // namespace dtrain
