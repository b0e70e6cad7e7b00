// The cluster a task belongs to: its jobs, the address of every task, and which task this process
// is. Parsed from the TensorFlow tutorial flags, from TF_CONFIG or from a JSON file, and validated
// once so the rest of the runtime can trust it. Reads no flags and no environment: callers pass
// text.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "comm/host_port.h"
#include "comm/tcp_congestion.h"

namespace dtrain {

// The jobs a cluster may have (DESIGN.md §3). "chief" is a worker that also coordinates; the
// "evaluator" reads checkpoints and takes no part in training.
inline constexpr std::string_view kPsJob = "ps";
inline constexpr std::string_view kWorkerJob = "worker";
inline constexpr std::string_view kChiefJob = "chief";
inline constexpr std::string_view kEvaluatorJob = "evaluator";

// One task of a cluster: "worker:1" is the second worker.
struct TaskId {
  std::string job;
  int index = 0;

  std::string to_string() const;  // "job:index"
  auto operator<=>(const TaskId&) const = default;
};

// job name -> its tasks' addresses, in index order. A plain value: it does not validate itself;
// the parsers below return only specs that passed validate_cluster_config(). A job with no tasks
// is the same as an absent job.
class ClusterSpec {
 public:
  using JobMap = std::map<std::string, std::vector<HostPort>, std::less<>>;

  ClusterSpec() = default;
  explicit ClusterSpec(JobMap jobs);

  // Job names in sorted order.
  std::vector<std::string> jobs() const;
  bool has_job(std::string_view job) const;
  // The job's addresses; empty when the job is absent.
  const std::vector<HostPort>& tasks(std::string_view job) const;
  int num_tasks(std::string_view job) const;
  bool has_task(const TaskId& task) const;
  // REQUIRES: has_task(task); otherwise throws Error naming the task.
  const HostPort& address(const TaskId& task) const;

  // One line for the start-up table: "chief=[a:2222] ps=[b:2222] worker=[c:2222,d:2222]".
  std::string to_string() const;
  bool operator==(const ClusterSpec&) const = default;

 private:
  JobMap jobs_;
};

struct ClusterConfig {
  ClusterSpec cluster;
  // This process. An evaluator task may be absent from cluster (the TFJob operator leaves the
  // evaluator out of TF_CONFIG's cluster): check cluster.has_task(task) before address(task).
  TaskId task;
  // --bind: the address this task listens on; empty: cluster/bind_address.h decides.
  std::string bind_host = {};
  // --tcp_congestion (ConnectionOptions::tcp_congestion)
  std::string tcp_congestion = kTcpCongestionAuto;
  // Every frame after the handshake carries a tag (comm/frame_mac.h); false only with
  // --unauthenticated_frames, which every task of the cluster must then be given.
  bool authenticate_frames = true;
};

// --- Parsers. Each returns a validated result or throws UsageError with one line that names the
// culprit (the flag, TF_CONFIG or the file, and the field) and the offending value.

// One "host:port" entry; culprit prefixes the error ("--ps_hosts", "TF_CONFIG: cluster.ps[0]").
// Accepts hostnames, IPv4 and bracketed IPv6 ("[::1]:9001"); the port must be 1-65535.
HostPort parse_host_port(std::string_view culprit, std::string_view text);

// A comma-separated list, "localhost:9001,localhost:9002", as given to flag. Empty text is an
// empty list; an empty entry ("a:1,,b:2", a trailing comma) or any space is an error.
std::vector<HostPort> parse_host_list(std::string_view flag, std::string_view text);

// The TensorFlow tutorials' flags: --ps_hosts, --worker_hosts, --job_name ("ps" or "worker"),
// --task_index. ps_hosts may be empty (a worker-only cluster, for all-reduce); worker_hosts may
// not.
ClusterConfig cluster_from_flags(std::string_view ps_hosts, std::string_view worker_hosts,
                                 std::string_view job_name, int task_index);

// TF_CONFIG as Kubeflow's TFJob operator sets it:
//   {"cluster": {"chief": [...], "ps": [...], "worker": [...], "evaluator": [...]},
//    "task": {"type": "worker", "index": 1}, "environment": "cloud"}
// Other top-level keys ("environment", "rpc_layer", ...) are ignored; task.type and task.index are
// required. The operator lists no "evaluator" job, even in the evaluator's own pod; a task of type
// "evaluator" is therefore accepted without one. Malformed JSON is reported with line and column.
ClusterConfig cluster_from_tf_config(std::string_view json_text);

// The "cluster" object of a TF_CONFIG-shaped JSON document, validated on its own (hosts,
// duplicates, job names, worker count, one chief); every other key, "task" included, is ignored.
// source names the document in errors ("TF_CONFIG", a file path).
ClusterSpec cluster_spec_from_json(std::string_view json_text, std::string_view source);

// A cluster file, {"cluster": {...}, "task": {...}}: the same shape as TF_CONFIG, but "task" may be
// left out when task is given (from --job_name/--task_index, which take precedence over the file's
// "task"). Errors name the file.
ClusterConfig cluster_from_file(const std::filesystem::path& path,
                                const std::optional<TaskId>& task = std::nullopt);

// The checks every parser applies, for a config built in code (the embedded launcher): no
// duplicate address, known jobs only, at least one worker or a chief, at most one chief, and a
// task that exists (or is an evaluator outside the cluster). Errors name source ("TF_CONFIG", a
// file) and the JSON field.
void validate_cluster_config(const ClusterConfig& config, std::string_view source);

// The TF_CONFIG text for config: what a launcher sets for a child task. Round-trips through
// cluster_from_tf_config().
std::string to_tf_config(const ClusterConfig& config);

// --- Roles. REQUIRES: a validated cluster.

// chief:0 if the cluster has a chief, else worker:0. It initialises or restores the variables,
// saves checkpoints and runs the final evaluation (DESIGN.md §3).
TaskId chief_task(const ClusterSpec& cluster);
bool is_chief(const ClusterSpec& cluster, const TaskId& task);
// The tasks that train, in rank order: chief:0 (if present), then worker:0..n-1. The ps and the
// evaluator do not train.
std::vector<TaskId> training_workers(const ClusterSpec& cluster);
// task's position in training_workers(), or -1 when it does not train.
int worker_rank(const ClusterSpec& cluster, const TaskId& task);

}  // namespace dtrain
