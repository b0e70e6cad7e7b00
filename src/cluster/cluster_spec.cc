// Parsing and validation of cluster specs. Every source (flags, TF_CONFIG, a file) is parsed into
// a ClusterConfig and then checked by one function, check_config(), which an Origin tells how to
// name the culprit: a flag ("--worker_hosts") or a JSON field ("TF_CONFIG: cluster.worker[1]").
#include "cluster/cluster_spec.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "base/error.h"
#include "base/json_error.h"

namespace dtrain {
namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 4> kKnownJobs = {kChiefJob, kEvaluatorJob, kPsJob,
                                                        kWorkerJob};

bool is_known_job(std::string_view job) {
  return std::find(kKnownJobs.begin(), kKnownJobs.end(), job) != kKnownJobs.end();
}

std::string known_jobs_text() { return fmt::format("{}", fmt::join(kKnownJobs, ", ")); }

// TFJob's deprecated "Master" replica type appears in TF_CONFIG as "master"; say what to use.
std::string unknown_job_hint(std::string_view job) {
  if (job == "master") return "; use the Chief replica type (\"chief\") instead of Master";
  return "";
}

// Where a config came from, so that an error points at what the user must fix. The cluster comes
// from the tutorial flags (source empty) or from a JSON document named source; the task may come
// from flags even when the cluster comes from a file.
struct Origin {
  std::string source;
  bool task_from_flags = false;

  bool cluster_from_flags() const { return source.empty(); }
  // The flag or field holding a job's hosts.
  std::string job_hosts(std::string_view job) const {
    if (cluster_from_flags()) return fmt::format("--{}_hosts", job);
    return fmt::format("{}: cluster.{}", source, job);
  }
  // One task's entry, as the second half of a message that already names the source.
  std::string task_entry(const TaskId& task) const {
    if (cluster_from_flags()) return task.to_string();
    return fmt::format("cluster.{}[{}]", task.job, task.index);
  }
  // The prefix of a message about two tasks, possibly of different jobs.
  std::string pair_prefix(const TaskId& a, const TaskId& b) const {
    if (!cluster_from_flags()) return source;
    if (a.job == b.job) return fmt::format("--{}_hosts", a.job);
    return fmt::format("--{}_hosts/--{}_hosts", a.job, b.job);
  }
  std::string cluster() const {
    if (cluster_from_flags()) return "--worker_hosts";
    return fmt::format("{}: cluster", source);
  }
  std::string task_type() const {
    return task_from_flags ? "--job_name" : fmt::format("{}: task.type", source);
  }
  std::string task_index() const {
    return task_from_flags ? "--task_index" : fmt::format("{}: task.index", source);
  }
};

void check_job_names(const ClusterSpec& cluster, const Origin& origin) {
  for (const std::string& job : cluster.jobs()) {
    if (is_known_job(job)) continue;
    throw UsageError(fmt::format("{}: '{}' is not a known job (known: {}){}", origin.cluster(), job,
                                 known_jobs_text(), unknown_job_hint(job)));
  }
}

void check_worker_count(const ClusterSpec& cluster, const Origin& origin) {
  // A chief is a worker that also coordinates: a cluster with only a chief is a 1-worker cluster.
  if (cluster.num_tasks(kWorkerJob) == 0 && cluster.num_tasks(kChiefJob) == 0) {
    if (origin.cluster_from_flags()) {
      throw UsageError("--worker_hosts: is empty; a cluster needs at least one worker");
    }
    throw UsageError(fmt::format(
        "{}: has no worker and no chief; a cluster needs at least one worker", origin.cluster()));
  }
  if (int chiefs = cluster.num_tasks(kChiefJob); chiefs > 1) {
    std::vector<std::string> addresses;
    for (const HostPort& hp : cluster.tasks(kChiefJob)) addresses.push_back(hp.to_string());
    throw UsageError(fmt::format("{}: has {} tasks ({}); a cluster has at most one chief",
                                 origin.job_hosts(kChiefJob), chiefs, fmt::join(addresses, ", ")));
  }
}

void check_duplicate_addresses(const ClusterSpec& cluster, const Origin& origin) {
  // Host names are case-insensitive in DNS. Different spellings of one machine ("localhost",
  // "127.0.0.1") are not resolved here; the second task to bind would fail naming its port.
  std::unordered_map<std::string, TaskId> owner;
  for (const std::string& job : cluster.jobs()) {
    const std::vector<HostPort>& tasks = cluster.tasks(job);
    for (int i = 0; i < static_cast<int>(tasks.size()); ++i) {
      std::string key = tasks[i].to_string();
      std::transform(key.begin(), key.end(), key.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      TaskId task{job, i};
      auto [it, inserted] = owner.emplace(key, task);
      if (inserted) continue;
      throw UsageError(fmt::format("{}: address '{}' is given to both {} and {}",
                                   origin.pair_prefix(it->second, task), tasks[i].to_string(),
                                   origin.task_entry(it->second), origin.task_entry(task)));
    }
  }
}

void check_task(const ClusterSpec& cluster, const TaskId& task, const Origin& origin) {
  if (task.job.empty()) throw UsageError(fmt::format("{}: is empty", origin.task_type()));
  if (!is_known_job(task.job)) {
    throw UsageError(fmt::format("{}: '{}' is not a known job (known: {}){}", origin.task_type(),
                                 task.job, known_jobs_text(), unknown_job_hint(task.job)));
  }
  if (task.job == kEvaluatorJob && !cluster.has_job(kEvaluatorJob)) {
    // The TFJob operator leaves the evaluator out of TF_CONFIG's cluster (in TensorFlow it is not
    // part of the training cluster), so an evaluator task needs no entry: nothing connects to it.
    if (task.index < 0) {
      throw UsageError(fmt::format("{}: {} is negative", origin.task_index(), task.index));
    }
    return;
  }
  if (!cluster.has_job(task.job)) {
    throw UsageError(fmt::format("{}: '{}' is not a job of this cluster (jobs: {})",
                                 origin.task_type(), task.job, fmt::join(cluster.jobs(), ", ")));
  }
  int n = cluster.num_tasks(task.job);
  if (task.index < 0 || task.index >= n) {
    std::string valid = n == 1 ? "0" : fmt::format("0-{}", n - 1);
    throw UsageError(fmt::format("{}: {} is out of range for job '{}' with {} task{} (valid: {})",
                                 origin.task_index(), task.index, task.job, n, n == 1 ? "" : "s",
                                 valid));
  }
}

void check_cluster(const ClusterSpec& cluster, const Origin& origin) {
  check_job_names(cluster, origin);
  check_worker_count(cluster, origin);
  check_duplicate_addresses(cluster, origin);
}

// The one validation every source goes through.
void check_config(const ClusterConfig& config, const Origin& origin) {
  check_cluster(config.cluster, origin);
  check_task(config.cluster, config.task, origin);
}

bool is_hostname_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

bool looks_like_ipv4(std::string_view host) {
  return std::all_of(host.begin(), host.end(),
                     [](char c) { return c == '.' || (c >= '0' && c <= '9'); });
}

bool is_valid_ipv6(std::string_view host) {
  // A zone ("fe80::1%eth0") is allowed after the address; inet_pton does not take it.
  std::string address(host.substr(0, host.find('%')));
  in6_addr out;
  return ::inet_pton(AF_INET6, address.c_str(), &out) == 1;
}

bool is_valid_ipv4(std::string_view host) {
  std::string address(host);
  in_addr out;
  return ::inet_pton(AF_INET, address.c_str(), &out) == 1;
}

// "9001" -> 9001; nullopt unless it is 1-65535 in decimal digits alone.
std::optional<uint16_t> parse_port(std::string_view text) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (value < 1 || value > std::numeric_limits<uint16_t>::max()) return std::nullopt;
  return static_cast<uint16_t>(value);
}

std::string json_type(const json& value) { return value.type_name(); }

json parse_json(std::string_view text, std::string_view source) {
  if (std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c); })) {
    throw UsageError(fmt::format("{}: is empty; expected a JSON object with \"cluster\"", source));
  }
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    // Not only parse_error: a number too large for a double ("1e999") is an out_of_range.
    throw UsageError(fmt::format("{}: not valid JSON: {}", source, describe_json_error(text, e)));
  }
}

const json& require_object(const json& doc, std::string_view source) {
  if (!doc.is_object()) {
    throw UsageError(fmt::format(
        "{}: must be a JSON object like {{\"cluster\": {{...}}, \"task\": {{...}}}}, got {}",
        source, json_type(doc)));
  }
  return doc;
}

ClusterSpec parse_cluster(const json& doc, std::string_view source) {
  auto it = doc.find("cluster");
  if (it == doc.end()) throw UsageError(fmt::format("{}: has no \"cluster\" object", source));
  if (!it->is_object()) {
    throw UsageError(
        fmt::format("{}: cluster must be an object of job name -> [\"host:port\", ...], got {}",
                    source, json_type(*it)));
  }
  ClusterSpec::JobMap jobs;
  for (const auto& [job, list] : it->items()) {
    std::string field = fmt::format("{}: cluster.{}", source, job);
    if (!list.is_array()) {
      throw UsageError(fmt::format("{}: must be a list of \"host:port\" strings, got {}", field,
                                   json_type(list)));
    }
    std::vector<HostPort>& tasks = jobs[job];
    for (size_t i = 0; i < list.size(); ++i) {
      std::string entry = fmt::format("{}[{}]", field, i);
      if (!list[i].is_string()) {
        throw UsageError(
            fmt::format("{}: must be a \"host:port\" string, got {}", entry, list[i].dump()));
      }
      tasks.push_back(parse_host_port(entry, list[i].get_ref<const std::string&>()));
    }
  }
  return ClusterSpec(std::move(jobs));
}

std::optional<TaskId> parse_task(const json& doc, std::string_view source) {
  auto it = doc.find("task");
  if (it == doc.end()) return std::nullopt;
  if (!it->is_object()) {
    throw UsageError(fmt::format(
        "{}: task must be an object like {{\"type\": \"worker\", \"index\": 0}}, got {}", source,
        json_type(*it)));
  }
  auto type = it->find("type");
  if (type == it->end()) throw UsageError(fmt::format("{}: task.type is missing", source));
  if (!type->is_string()) {
    throw UsageError(
        fmt::format("{}: task.type must be a job name string, got {}", source, type->dump()));
  }
  auto index = it->find("index");
  if (index == it->end()) throw UsageError(fmt::format("{}: task.index is missing", source));
  if (!index->is_number_integer()) {
    throw UsageError(
        fmt::format("{}: task.index must be an integer, got {}", source, index->dump()));
  }
  int64_t value = index->get<int64_t>();
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
    throw UsageError(fmt::format("{}: task.index: {} is out of range", source, value));
  }
  return TaskId{type->get<std::string>(), static_cast<int>(value)};
}

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw UsageError(
        fmt::format("{}: cannot read cluster file: {}", path.string(), std::strerror(errno)));
  }
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

std::string TaskId::to_string() const { return fmt::format("{}:{}", job, index); }

ClusterSpec::ClusterSpec(JobMap jobs) : jobs_(std::move(jobs)) {
  std::erase_if(jobs_, [](const auto& entry) { return entry.second.empty(); });
}

std::vector<std::string> ClusterSpec::jobs() const {
  std::vector<std::string> names;
  for (const auto& [job, tasks] : jobs_) names.push_back(job);
  return names;
}

bool ClusterSpec::has_job(std::string_view job) const { return jobs_.contains(job); }

const std::vector<HostPort>& ClusterSpec::tasks(std::string_view job) const {
  static const std::vector<HostPort> kNone;
  auto it = jobs_.find(job);
  return it == jobs_.end() ? kNone : it->second;
}

int ClusterSpec::num_tasks(std::string_view job) const {
  return static_cast<int>(tasks(job).size());
}

bool ClusterSpec::has_task(const TaskId& task) const {
  return task.index >= 0 && task.index < num_tasks(task.job);
}

const HostPort& ClusterSpec::address(const TaskId& task) const {
  if (!has_task(task)) {
    throw Error(fmt::format("no task {} in the cluster (job '{}' has {} tasks)", task.to_string(),
                            task.job, num_tasks(task.job)));
  }
  return tasks(task.job)[task.index];
}

std::string ClusterSpec::to_string() const {
  std::vector<std::string> parts;
  for (const auto& [job, tasks] : jobs_) {
    std::vector<std::string> addresses;
    for (const HostPort& hp : tasks) addresses.push_back(hp.to_string());
    parts.push_back(fmt::format("{}=[{}]", job, fmt::join(addresses, ",")));
  }
  return fmt::format("{}", fmt::join(parts, " "));
}

HostPort parse_host_port(std::string_view culprit, std::string_view text) {
  auto fail = [&](std::string_view what) -> HostPort {
    throw UsageError(fmt::format("{}: '{}' {}", culprit, text, what));
  };
  if (text.empty()) return fail("is empty; expected host:port");
  if (std::any_of(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c); })) {
    return fail("contains a space; expected host:port");
  }
  std::string_view host;
  std::string_view port;
  if (text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return fail("has '[' without ']'; expected [ipv6]:port");
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (rest.empty()) return fail("has no port; expected [ipv6]:port");
    if (rest.front() != ':') return fail("has text after ']' that is not ':port'");
    port = rest.substr(1);
    if (!is_valid_ipv6(host)) return fail("is not a valid IPv6 address in brackets");
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return fail("has no port; expected host:port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return fail("has more than one ':'; write an IPv6 address in brackets, as [::1]:9001");
    }
    if (host.empty()) return fail("has no host; expected host:port");
    if (!std::all_of(host.begin(), host.end(), is_hostname_char)) {
      return fail("is not a valid host name (letters, digits, '-', '.', '_')");
    }
    if (looks_like_ipv4(host) && !is_valid_ipv4(host)) return fail("is not a valid IPv4 address");
  }
  if (port.empty()) return fail("has no port; expected host:port");
  std::optional<uint16_t> number = parse_port(port);
  if (!number) return fail("is not a valid port (1-65535)");
  return HostPort{std::string(host), *number};
}

std::vector<HostPort> parse_host_list(std::string_view flag, std::string_view text) {
  std::vector<HostPort> hosts;
  if (text.empty()) return hosts;
  if (std::any_of(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c); })) {
    throw UsageError(
        fmt::format("{}: '{}' contains a space; separate entries with ',' alone", flag, text));
  }
  size_t start = 0;
  for (int entry = 1;; ++entry) {
    size_t comma = text.find(',', start);
    std::string_view item =
        text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
    if (item.empty()) {
      throw UsageError(fmt::format("{}: entry {} of '{}' is empty", flag, entry, text));
    }
    hosts.push_back(parse_host_port(flag, item));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return hosts;
}

ClusterConfig cluster_from_flags(std::string_view ps_hosts, std::string_view worker_hosts,
                                 std::string_view job_name, int task_index) {
  ClusterSpec::JobMap jobs;
  jobs[std::string(kPsJob)] = parse_host_list("--ps_hosts", ps_hosts);
  jobs[std::string(kWorkerJob)] = parse_host_list("--worker_hosts", worker_hosts);
  ClusterConfig config{ClusterSpec(std::move(jobs)), TaskId{std::string(job_name), task_index}};
  check_config(config, Origin{"", /*task_from_flags=*/true});
  return config;
}

ClusterConfig cluster_from_tf_config(std::string_view json_text) {
  constexpr std::string_view kSource = "TF_CONFIG";
  const json doc = parse_json(json_text, kSource);
  require_object(doc, kSource);
  ClusterSpec cluster = parse_cluster(doc, kSource);
  std::optional<TaskId> task = parse_task(doc, kSource);
  if (!task)
    throw UsageError("TF_CONFIG: has no \"task\" (expected {\"type\": ..., \"index\": ...})");
  ClusterConfig config{std::move(cluster), std::move(*task)};
  check_config(config, Origin{std::string(kSource)});
  return config;
}

ClusterSpec cluster_spec_from_json(std::string_view json_text, std::string_view source) {
  const json doc = parse_json(json_text, source);
  require_object(doc, source);
  ClusterSpec cluster = parse_cluster(doc, source);
  check_cluster(cluster, Origin{std::string(source)});
  return cluster;
}

ClusterConfig cluster_from_file(const std::filesystem::path& path,
                                const std::optional<TaskId>& task) {
  const std::string source = path.string();
  const json doc = parse_json(read_text_file(path), source);
  require_object(doc, source);
  ClusterSpec cluster = parse_cluster(doc, source);
  // Flags take precedence over the file (DESIGN.md §3); the file's task is still checked for shape.
  std::optional<TaskId> file_task = parse_task(doc, source);
  if (!task && !file_task) {
    throw UsageError(fmt::format(
        "{}: has no \"task\"; give it in the file or with --job_name and --task_index", source));
  }
  ClusterConfig config{std::move(cluster), task ? *task : *file_task};
  check_config(config, Origin{source, /*task_from_flags=*/task.has_value()});
  return config;
}

void validate_cluster_config(const ClusterConfig& config, std::string_view source) {
  check_config(config, Origin{std::string(source)});
}

std::string to_tf_config(const ClusterConfig& config) {
  json cluster = json::object();
  for (const std::string& job : config.cluster.jobs()) {
    json addresses = json::array();
    for (const HostPort& hp : config.cluster.tasks(job)) addresses.push_back(hp.to_string());
    cluster[job] = std::move(addresses);
  }
  json doc = {{"cluster", std::move(cluster)},
              {"task", {{"type", config.task.job}, {"index", config.task.index}}}};
  return doc.dump();
}

TaskId chief_task(const ClusterSpec& cluster) {
  if (cluster.has_job(kChiefJob)) return TaskId{std::string(kChiefJob), 0};
  return TaskId{std::string(kWorkerJob), 0};
}

bool is_chief(const ClusterSpec& cluster, const TaskId& task) {
  return task == chief_task(cluster);
}

std::vector<TaskId> training_workers(const ClusterSpec& cluster) {
  std::vector<TaskId> ranks;
  if (cluster.has_job(kChiefJob)) ranks.push_back(TaskId{std::string(kChiefJob), 0});
  for (int i = 0; i < cluster.num_tasks(kWorkerJob); ++i) {
    ranks.push_back(TaskId{std::string(kWorkerJob), i});
  }
  return ranks;
}

int worker_rank(const ClusterSpec& cluster, const TaskId& task) {
  std::vector<TaskId> ranks = training_workers(cluster);
  auto it = std::find(ranks.begin(), ranks.end(), task);
  return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
}

}  // namespace dtrain
