// The checks of the flag table's rows (plan/flags.cc): each names its flag and the value at fault.
#include "plan/flag_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "base/error.h"
#include "comm/tcp_congestion.h"
#include "nn/model_zoo.h"
#include "optim/optimizer.h"
#include "plan/run_plan.h"
#include "tensor/bf16_gemm.h"
#include "train/ps_trainer.h"

namespace dtrain::flag_checks {
namespace {

void check(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

template <auto Field>
void check_not_negative(const RunPlan& p, std::string_view flag) {
  const auto value = p.config.*Field;
  check(value >= 0 && std::isfinite(static_cast<double>(value)),
        fmt::format("{} {}: must not be negative", flag, value));
}

template <auto Field>
void check_seconds(const RunPlan& p, std::string_view flag) {
  const int seconds = p.flags.*Field;
  check(seconds >= 1, fmt::format("{} {}: must be at least 1 second", flag, seconds));
}

}  // namespace

// Checks of the training settings (the recipe's values where a flag was not given).

void check_batch_size(const RunPlan& p, int) {
  check(p.config.batch_size >= 1,
        fmt::format("--batch_size {}: must be at least 1", p.config.batch_size));
}

void check_model(const RunPlan& p, int) {
  const ModelConfig& model = p.config.model;
  if (p.has("--hidden_units") && !model_spec(model).hidden_units) {
    throw UsageError(fmt::format(
        "--hidden_units {}: --model {} has no layer it sizes (a model's JSON names one as "
        "\"dtrain\": {{\"hidden_units\": {{\"layer\": NAME}}}})",
        p.text_of("--hidden_units"), model.name));
  }
  // The model is built here only to be checked (--model, --hidden_units): a Model holds no values.
  make_model(model);
}

void check_learning_rate(const RunPlan& p, int) {
  const float lr = p.config.learning_rate;
  check(lr > 0 && std::isfinite(lr),
        fmt::format("--learning_rate {}: must be a positive number", lr));
}

void check_lr_decay_rate(const RunPlan& p, int) {
  const float rate = p.config.lr_decay_rate;
  check(rate > 0 && std::isfinite(rate),
        fmt::format("--lr_decay_rate {}: must be a positive number (1: no decay)", rate));
}

void check_lr_schedule(const RunPlan& p, int) {
  const TrainConfig& c = p.config;
  const std::string kind = lr_decay_name(c.lr_schedule);
  check(c.lr_decay_steps >= 0,
        fmt::format("--lr_decay_steps {}: must not be negative", c.lr_decay_steps));
  check(c.lr_warmup_steps >= 0,
        fmt::format("--lr_warmup_steps {}: must not be negative", c.lr_warmup_steps));
  check(c.lr_alpha >= 0 && c.lr_alpha <= 1,
        fmt::format("--lr_alpha {}: must be in [0, 1] (the final rate as a fraction of "
                    "--learning_rate)",
                    c.lr_alpha));
  check(c.lr_alpha == 0 || c.lr_schedule == LrDecay::kCosine,
        fmt::format("--lr_alpha {}: only --lr_schedule cosine has a final fraction; the schedule "
                    "is {}",
                    c.lr_alpha, kind));
  const bool piecewise = c.lr_schedule == LrDecay::kPiecewise;
  check(piecewise || (c.lr_boundaries.empty() && c.lr_values.empty()),
        fmt::format("{}: only --lr_schedule piecewise takes boundaries and values; the schedule is "
                    "{}",
                    c.lr_boundaries.empty() ? "--lr_values" : "--lr_boundaries", kind));
  if (!piecewise) return;
  check(!c.lr_values.empty(),
        "--lr_schedule piecewise: give the rates with --lr_values and the steps where they change "
        "with --lr_boundaries (e.g. --lr_boundaries 1000,2000 --lr_values 0.1,0.01,0.001)");
  check(c.lr_values.size() == c.lr_boundaries.size() + 1,
        fmt::format("--lr_values {}: needs {} rates, one more than the {} of --lr_boundaries {}",
                    fmt::join(c.lr_values, ","), c.lr_boundaries.size() + 1, c.lr_boundaries.size(),
                    fmt::join(c.lr_boundaries, ",")));
  for (size_t i = 0; i < c.lr_boundaries.size(); ++i) {
    check(c.lr_boundaries[i] > (i == 0 ? 0 : c.lr_boundaries[i - 1]),
          fmt::format("--lr_boundaries {}: steps must be positive and strictly increasing",
                      fmt::join(c.lr_boundaries, ",")));
  }
  for (const float value : c.lr_values) {
    check(value > 0 && std::isfinite(value),
          fmt::format("--lr_values {}: every rate must be a positive number",
                      fmt::join(c.lr_values, ",")));
  }
}

void check_optimizer(const RunPlan& p, int) {
  const std::string& name = p.config.optimizer.name;
  check(std::find(optimizer_names().begin(), optimizer_names().end(), name) !=
            optimizer_names().end(),
        fmt::format("--optimizer {}: unknown; choose one of {}", name,
                    fmt::join(optimizer_names(), ", ")));
  // A hyper-parameter of another optimizer would be ignored without a word.
  struct Owner {
    std::string_view flag;
    std::vector<std::string_view> optimizers;
  };
  static const std::vector<Owner> owners = {
      {"--momentum", {"momentum", "sgd", "rmsprop"}},
      {"--nesterov", {"momentum", "sgd"}},
      {"--beta_1", {"adam", "adamw", "nadam"}},
      {"--beta_2", {"adam", "adamw", "nadam"}},
      {"--epsilon", {"adam", "adamw", "nadam", "rmsprop", "adagrad"}},
      {"--rho", {"rmsprop"}},
      {"--centered", {"rmsprop"}},
      {"--initial_accumulator_value", {"adagrad"}},
  };
  for (const Owner& owner : owners) {
    if (!p.has(owner.flag) || std::find(owner.optimizers.begin(), owner.optimizers.end(), name) !=
                                  owner.optimizers.end()) {
      continue;
    }
    throw UsageError(fmt::format("{}{}{}: means nothing to --optimizer {}; it is a setting of {}",
                                 owner.flag, p.text_of(owner.flag).empty() ? "" : " ",
                                 p.text_of(owner.flag), name, fmt::join(owner.optimizers, ", ")));
  }
  const OptimizerConfig& o = p.config.optimizer;
  check(!o.use_nesterov || name == "momentum" || optimizer_defaults(o).momentum > 0,
        "--nesterov: sgd's Nesterov momentum needs --momentum above 0");
  check_optimizer_config(o);
}

void check_moving_average_decay(const RunPlan& p, int) {
  const float decay = p.config.moving_average_decay;
  check(decay >= 0 && decay < 1,
        fmt::format("--moving_average_decay {}: must be in [0, 1)", decay));
}

void check_l2(const RunPlan& p, int) {
  const std::optional<float>& l2 = p.config.model.l2;
  check(!l2 || (*l2 >= 0 && std::isfinite(*l2)),
        fmt::format("--l2 {}: must not be negative", l2.value_or(0)));
}

void check_train_steps(const RunPlan& p, int) {
  check(p.config.train_steps >= 0,
        fmt::format("--train_steps {}: must not be negative", p.config.train_steps));
}

void check_epochs(const RunPlan& p, int) {
  const TrainConfig& c = p.config;
  check(c.train_steps > 0 || (c.epochs > 0 && std::isfinite(c.epochs)),
        fmt::format("--epochs {}: must be positive (or give --train_steps)", c.epochs));
}

void check_data_pair(const RunPlan& p, int) {
  const TrainConfig& c = p.config;
  check(c.train_data.empty() == c.test_data.empty(),
        fmt::format("{} is given without {}: training on your own files needs both",
                    c.train_data.empty() ? "--test_data" : "--train_data",
                    c.train_data.empty() ? "--train_data" : "--test_data"));
}

void check_label_column(const RunPlan& p, int) {
  check(p.config.data_options.label_column != kNoLabelColumn,
        "--label_column none: training needs labels; name the label column, or leave the flag out "
        "to take the column named label, class, target or y, else the last");
}

void check_shuffle_buffer(const RunPlan& p, int) {
  const TrainConfig& c = p.config;
  check(c.shuffle_buffer >= 0,
        fmt::format("--shuffle_buffer {}: must not be negative", c.shuffle_buffer));
  check(c.shuffle_buffer == 0 || !c.train_data.empty(),
        fmt::format("--shuffle_buffer {}: streams --train_data files; MNIST from --data_dir is "
                    "held in memory",
                    c.shuffle_buffer));
}

void check_validation_size(const RunPlan& p, int) {
  const TrainConfig& c = p.config;
  check(c.validation_size >= 0,
        fmt::format("--validation_size {}: must not be negative", c.validation_size));
  check(c.shuffle_buffer == 0 || c.validation_size == 0,
        fmt::format("--validation_size {}: streamed training data (--shuffle_buffer) is not split; "
                    "leave --validation_size out",
                    c.validation_size));
}

void check_threads(const RunPlan& p, int) {
  check(p.config.threads >= 1, fmt::format("--threads {}: must be at least 1", p.config.threads));
}

void check_precision(const RunPlan& p, int) {
  if (p.config.precision != Precision::kBf16) return;
  const std::string why_not = bf16_unsupported_reason();
  check(why_not.empty(), fmt::format("--precision bf16: {}; use fp32", why_not));
}

void check_towers(const RunPlan& p, int) {
  const TrainConfig& c = p.config;
  check(c.towers >= 1, fmt::format("--towers {}: must be at least 1", c.towers));
  check(c.towers <= c.batch_size,
        fmt::format("--towers {}: more towers than the {} examples of a batch (--batch_size)",
                    c.towers, c.batch_size));
}

void check_shutdown_timeout(const RunPlan& p, int) {
  check(p.config.shutdown_timeout_ms >= 1000,
        fmt::format("--shutdown_timeout {}: must be at least 1 second",
                    p.config.shutdown_timeout_ms / 1000.0));
}

// Periodic evaluation, the target and early stopping judge the held-out examples; with none held
// out they would judge the test set, which is how a run ends up tuned on its test data.
void check_evaluation(const RunPlan& p, int) {
  const TrainConfig& c = p.config;
  check(c.eval_every >= 0, fmt::format("--eval_every {}: must not be negative", c.eval_every));
  check(
      c.early_stopping_patience >= 0,
      fmt::format("--early_stopping_patience {}: must not be negative", c.early_stopping_patience));
  check(c.early_stopping_patience == 0 || c.eval_every > 0 || c.eval_each_epoch,
        fmt::format("--early_stopping_patience {}: counts evaluations, and there are none: give "
                    "--eval_every N (Python's fit: validation_data or validation_split, "
                    "evaluated at each epoch's end)",
                    c.early_stopping_patience));
  if (c.validation_size > 0) return;
  const std::string flag = c.eval_every > 0 ? fmt::format("--eval_every {}", c.eval_every)
                           : c.target_accuracy
                               ? fmt::format("--target_accuracy {}", *c.target_accuracy)
                               : std::string();
  if (flag.empty()) return;
  check(c.shuffle_buffer == 0,
        fmt::format("{}: judges the validation examples held out of the training data, and "
                    "streamed data (--shuffle_buffer) holds none out; leave it out (the test set "
                    "is evaluated once, at the end)",
                    flag));
  check(false, fmt::format("{}: judges the validation examples held out of the training data, and "
                           "--validation_size is 0{}; hold some out with --validation_size N (the "
                           "test set is evaluated once, at the end)",
                           flag,
                           c.train_data.empty()
                               ? ""
                               : " (--train_data is trained on whole unless told otherwise)"));
}

void check_target_accuracy(const RunPlan& p, int) {
  const std::optional<double>& target = p.config.target_accuracy;
  check(!target || (*target > 0 && *target <= 1),
        fmt::format("--target_accuracy {}: must be in (0, 1]", target.value_or(0)));
}

void check_inject_nonfinite_at(const RunPlan& p, int) {
  for (const int64_t step : p.config.nonfinite_gradient_steps) {
    check(step >= 1,
          fmt::format("--inject_nonfinite_at {}: steps are counted from 1 (this task's own steps)",
                      step));
  }
}

// Checks of the cluster's settings, in the units the flags give them.

void check_sync_counts(const RunPlan& p, int workers) {
  if (workers <= 0) return;  // a task checks these against its cluster (train/ps_trainer.h)
  SyncOptions sync;
  sync.replicas_to_aggregate = p.flags.replicas_to_aggregate;
  sync.total_num_replicas = p.flags.total_num_replicas;
  check_sync_options(sync, workers);
}

void check_fusion_bytes(const RunPlan& p, int) {
  const uint64_t bytes = p.flags.fusion_bytes;
  check(bytes == 0 || bytes >= sizeof(float),
        fmt::format("--fusion_bytes {}: must be 0 (one buffer) or at least {} (one float)", bytes,
                    sizeof(float)));
}

// The local launcher (and Python's fit) starts every task on this machine: a process (a thread)
// with its own copy of the model, its connections and its ports. A thousand of them is already
// far more than a machine's cores; 100,000 ran it out of memory or ports instead of saying so.
constexpr int kMostLocalTasks = 1024;

void check_ps_count(const RunPlan& p, int) {
  check(p.flags.ps >= 1, fmt::format("--ps {}: need at least one ps task", p.flags.ps));
  check(p.flags.ps <= kMostLocalTasks,
        fmt::format("--ps {}: at most {} tasks start on this machine (the local launcher's "
                    "processes, or Python's threads); for more, start each with `dtrain task` on "
                    "the hosts of a cluster (docs/cluster.md)",
                    p.flags.ps, kMostLocalTasks));
}

void check_workers(const RunPlan& p, int) {
  check(p.flags.workers >= 1, fmt::format("--workers {}: need at least one", p.flags.workers));
  check(p.flags.workers <= kMostLocalTasks,
        fmt::format("--workers {}: at most {} tasks start on this machine (the local launcher's "
                    "processes, or Python's threads); for more, start each with `dtrain task` on "
                    "the hosts of a cluster (docs/cluster.md)",
                    p.flags.workers, kMostLocalTasks));
}

// The one range check of --min_workers (DESIGN.md §2a "One Membership"): against --workers for
// the local launcher's job, against the cluster's workers for a task of a cluster (a launcher's
// ranks, a hand-started sync job), whose run passes them.
void check_min_workers(const RunPlan& p, int cluster_workers) {
  const FlagValues& f = p.flags;
  const int workers = cluster_workers > 0 ? cluster_workers : f.workers;
  check(f.min_workers >= 0 && f.min_workers <= workers,
        cluster_workers > 0
            ? fmt::format("--min_workers {}: must be between 1 and the {} workers of the cluster, "
                          "or 0 (not elastic)",
                          f.min_workers, workers)
            : fmt::format("--min_workers {}: must be between 1 and --workers ({}), or 0 (not "
                          "elastic)",
                          f.min_workers, workers));
}

void check_max_workers(const RunPlan& p, int) {
  const FlagValues& f = p.flags;
  // An async job takes joining workers without a minimum: it survives any loss already.
  const bool async = p.strategy == StrategyKind::kAsync;
  check(f.max_workers == 0 || ((async || f.min_workers > 0) && f.max_workers >= f.workers),
        f.min_workers == 0 && !async
            ? fmt::format("--max_workers {}: an elastic job's bound; give --min_workers too",
                          f.max_workers)
            : fmt::format("--max_workers {}: must be at least --workers ({})", f.max_workers,
                          f.workers));
}

void check_elastic_batch(const RunPlan& p, int) {
  const FlagValues& f = p.flags;
  check(f.elastic_batch == "worker" || f.min_workers > 0,
        fmt::format("--elastic_batch {}: what an elastic job keeps at a change; give "
                    "--min_workers too",
                    f.elastic_batch));
}

void check_metrics_port(const RunPlan& p, int) {
  const int port = p.flags.metrics_port;
  check(port >= -1 && port <= 65535,
        fmt::format("--metrics_port {}: a TCP port (1..65535), 0 for a free one, or -1 for none",
                    port));
}

void check_tcp_congestion(const RunPlan& p, int) {
  const std::string why = tcp_congestion_refusal(p.flags.tcp_congestion);
  check(why.empty(), fmt::format("--tcp_congestion {}: {}", p.flags.tcp_congestion, why));
}

void check_max_restarts(const RunPlan& p, int) {
  check(p.flags.max_restarts >= 0,
        fmt::format("--max_restarts {}: must not be negative", p.flags.max_restarts));
}

void check_summary_steps(const RunPlan& p, int) {
  check_not_negative<&TrainConfig::summary_steps>(p, "--summary_steps");
}

void check_log_every(const RunPlan& p, int) {
  check_not_negative<&TrainConfig::log_every>(p, "--log_every");
}

void check_log_secs(const RunPlan& p, int) {
  check_not_negative<&TrainConfig::log_secs>(p, "--log_secs");
}

void check_save_steps(const RunPlan& p, int) {
  check_not_negative<&TrainConfig::save_steps>(p, "--save_steps");
}

void check_save_secs(const RunPlan& p, int) {
  check_not_negative<&TrainConfig::save_secs>(p, "--save_secs");
}

void check_peer_timeout(const RunPlan& p, int) {
  check_seconds<&FlagValues::peer_timeout>(p, "--peer_timeout");
}

void check_worker_timeout(const RunPlan& p, int) {
  check_seconds<&FlagValues::worker_timeout>(p, "--worker_timeout");
}

void check_liveness_timeout(const RunPlan& p, int) {
  check_seconds<&FlagValues::liveness_timeout>(p, "--liveness_timeout");
}

void check_step_delay_ms(const RunPlan& p, int) {
  check_not_negative<&TrainConfig::step_delay_ms>(p, "--step_delay_ms");
}

void check_stall_warning(const RunPlan& p, int) {
  const double seconds = p.flags.stall_warning;
  check(seconds >= 0 && seconds <= 86400,
        fmt::format("--stall_warning {}: must be from 0 (never) to 86400 seconds", seconds));
}

void check_collective_timeout(const RunPlan& p, int) {
  check_seconds<&FlagValues::collective_timeout>(p, "--collective_timeout");
}

}  // namespace dtrain::flag_checks

namespace dtrain {

Precision usable_precision(const std::string& name) {
  Precision precision = Precision::kFp32;
  try {
    precision = parse_precision(name);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--precision {}: {}", name, e.what()));
  }
  if (precision == Precision::kBf16) {
    if (const std::string why_not = bf16_unsupported_reason(); !why_not.empty()) {
      throw UsageError(fmt::format("--precision bf16: {}; use fp32", why_not));
    }
  }
  return precision;
}

}  // namespace dtrain
