#include "support/ps_cluster.h"

#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <stdexcept>

#include "cluster/free_ports.h"
#include "support/text_match.h"

namespace dtrain::testing {

std::string secret_env(std::string_view secret) { return fmt::format("DTRAIN_SECRET={}", secret); }

std::vector<std::string> softmax_flags() {
  return {"--model",     "softmax", "--threads", "1", "--data_dir", mnist_dir().string(),
          "--log_every", "0"};
}

std::string wait_for_global_step(DtrainProcess& worker, int64_t step) {
  static constexpr std::string_view kField = "global_step=";
  return worker.wait_for_line_where([step](const std::string& line) {
    const size_t at = line.find(kField);
    return at != std::string::npos && std::stoll(line.substr(at + kField.size())) >= step;
  });
}

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string all_output(const ProcessResult& r) {
  return fmt::format("exit code {}, signal {}\n--- stdout ---\n{}--- stderr ---\n{}", r.exit_code,
                     r.signal, r.out, r.err);
}

HandStartedCluster::HandStartedCluster(int ps, int workers)
    : ps_(ps), ports_(pick_free_ports(ps + workers)) {
  list_hosts(std::vector<std::string>(ports_.size(), "localhost"));
}

HandStartedCluster::HandStartedCluster(int ps, int workers, const VirtualNetwork& network)
    : ps_(ps), network_(&network), ports_(static_cast<size_t>(ps + workers), kNetworkPort) {
  std::vector<std::string> hosts;
  for (int i = 0; i < ps + workers; ++i) hosts.push_back(network.address(i));
  list_hosts(hosts);
}

void HandStartedCluster::list_hosts(const std::vector<std::string>& hosts) {
  auto list = [&](int first, int n) {
    std::string text;
    for (int i = first; i < first + n; ++i)
      text += fmt::format("{}{}:{}", i > first ? "," : "", hosts[i], ports_[i]);
    return text;
  };
  ps_hosts_ = list(0, ps_);
  worker_hosts_ = list(ps_, static_cast<int>(hosts.size()) - ps_);
  workers_ps_hosts_ = ps_hosts_;
}

int HandStartedCluster::host_of(const std::string& job, int index) const {
  return job == "ps" ? index : ps_ + index;
}

void HandStartedCluster::route_workers_to_ps(int index, uint16_t port) {
  const std::string from = fmt::format("localhost:{}", ports_[static_cast<size_t>(index)]);
  workers_ps_hosts_.replace(workers_ps_hosts_.find(from), from.size(),
                            fmt::format("localhost:{}", port));
}

std::unique_ptr<DtrainProcess> HandStartedCluster::start(
    const std::string& job, int index, const std::vector<std::string>& flags,
    std::string_view secret, const std::vector<std::string>& prefix) const {
  std::vector<std::string> args = {"task",         "--job_name",          job,
                                   "--task_index", std::to_string(index), "--worker_hosts",
                                   worker_hosts_};
  // Without ps tasks the workers form an all-reduce ring.
  if (!ps_hosts_.empty())
    args = concat(std::move(args), {"--ps_hosts", job == "ps" ? ps_hosts_ : workers_ps_hosts_});
  args = concat(std::move(args), flags);
  DtrainProcess::Options options;
  options.extra_env = {secret_env(secret)};
  if (network_ != nullptr) options.prefix = network_->run_on(host_of(job, index));
  options.prefix.insert(options.prefix.end(), prefix.begin(), prefix.end());
  return std::make_unique<DtrainProcess>(args, options);
}

std::optional<std::vector<int64_t>> numbers_in(const std::string& text,
                                               const std::string& pattern) {
  const auto match = first_match(text, pattern);
  if (!match) return std::nullopt;
  std::vector<int64_t> numbers;
  for (size_t i = 1; i < match->size(); ++i) numbers.push_back(std::stoll((*match)[i]));
  return numbers;
}

std::optional<PsSummary> ps_summary(const std::string& out, int ps) {
  const auto n = numbers_in(
      out, fmt::format(
               R"(ps{}: done at global step ([0-9]+): ([0-9]+) shard updates applied, ([0-9]+) )"
               R"(stale gradients dropped, ([0-9]+) duplicate pushes, ([0-9]+) non-finite )"
               R"(gradients rejected; [0-9]+ connections \(([0-9]+) rejected, ([0-9]+) failed\))",
               ps));
  if (!n) return std::nullopt;
  return PsSummary{(*n)[0], (*n)[1], (*n)[2], (*n)[3], (*n)[4], (*n)[5], (*n)[6]};
}

double test_accuracy(int worker, const std::string& out) {
  const auto match =
      first_match(out, fmt::format(R"(worker={}: test accuracy = ([0-9.]+))", worker));
  return match ? std::stod((*match)[1]) : -1.0;
}

int64_t local_steps_of(int worker, const std::string& out) {
  const auto n = numbers_in(
      out, fmt::format(R"(worker={}: training elapsed time: .*\(([0-9]+) local steps)", worker));
  return n ? (*n)[0] : -1;
}

int64_t fault_step(std::string_view what, int64_t first, int64_t last) {
  const char* env = std::getenv("DTRAIN_FAULT_SEED");
  const uint64_t seed = env && *env ? std::stoull(env) : 20261123;
  std::mt19937_64 rng(seed ^ std::hash<std::string_view>{}(what));
  const int64_t step = std::uniform_int_distribution<int64_t>(first, last)(rng);
  fmt::print("{}: {} (DTRAIN_FAULT_SEED={})\n", what, step, seed);
  return step;
}

pid_t signal_worker_at(DtrainProcess& launcher, int index, std::string_view marker, int signal) {
  const std::string worker = fmt::format("[worker{}] worker={}, epoch=", index, index);
  const std::string line = launcher.wait_for_line_where([&](const std::string& text) {
    return text.starts_with(worker) && text.find(marker) != std::string::npos;
  });
  if (line.find(marker) == std::string::npos) return -1;
  const pid_t pid = child_with_arguments(
      launcher.pid(), {"--job_name", "worker", "--task_index", std::to_string(index)});
  if (pid <= 0 || ::kill(pid, signal) != 0) return -1;
  return pid;
}

pid_t child_with_arguments(pid_t parent, const std::vector<std::string>& arguments) {
  namespace fs = std::filesystem;
  const fs::path tasks = fmt::format("/proc/{}/task", parent);
  std::error_code error;
  for (const auto& task : fs::directory_iterator(tasks, error)) {
    std::ifstream children(task.path() / "children");
    for (pid_t pid; children >> pid;) {
      std::ifstream cmdline(fmt::format("/proc/{}/cmdline", pid));
      std::vector<std::string> args;
      for (std::string arg; std::getline(cmdline, arg, '\0');) args.push_back(arg);
      if (std::search(args.begin(), args.end(), arguments.begin(), arguments.end()) != args.end())
        return pid;
    }
  }
  return -1;
}

std::vector<std::string> with_flag(std::vector<std::string> flags, const std::string& flag,
                                   const std::string& value) {
  const auto at = std::find(flags.begin(), flags.end(), flag);
  if (at == flags.end() || at + 1 == flags.end())
    throw std::logic_error("with_flag: no " + flag + " to replace");
  *(at + 1) = value;
  return flags;
}

}  // namespace dtrain::testing
