// The elastic tests' job: its flags, and the worker a test strikes.
#include "support/elastic_job.h"

#include <fmt/format.h>

#include <filesystem>

#include "support/ps_cluster.h"

namespace dtrain::testing {

std::vector<std::string> elastic_training(int steps) {
  return concat(with_flag(softmax_flags(), "--log_every", "20"),
                {"--train_steps", std::to_string(steps), "--step_delay_ms", "2"});
}

std::vector<std::string> ElasticJob::launcher_flags() const {
  return concat(
      {"train", "--strategy", strategy, "--workers", std::to_string(workers), "--min_workers",
       std::to_string(min_workers), "--max_restarts", std::to_string(max_restarts)},
      elastic_training(steps));
}

std::string ElasticJob::step_marker(int64_t step) const {
  return fmt::format("{}={},", strategy == "sync" ? "local_step" : "global_step", step);
}

pid_t ElasticJob::signal_worker_at(DtrainProcess& launcher, int index, int64_t step,
                                   int signal) const {
  return testing::signal_worker_at(launcher, index, step_marker(step), signal);
}

std::string write_secret_file(const TempDir& dir, std::string_view secret) {
  write_bytes(dir / "secret", std::string(secret));
  std::filesystem::permissions(dir / "secret", std::filesystem::perms::owner_read);
  return (dir / "secret").string();
}

std::vector<std::string> launcher_rank_env(int rank, int world, const std::string& master,
                                           uint16_t port, std::string_view secret) {
  return {fmt::format("RANK={}", rank), fmt::format("WORLD_SIZE={}", world),
          "MASTER_ADDR=" + master, fmt::format("MASTER_PORT={}", port),
          fmt::format("DTRAIN_SECRET={}", secret)};
}

}  // namespace dtrain::testing
