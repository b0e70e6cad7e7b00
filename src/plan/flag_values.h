// The values of `dtrain train` and `dtrain task` as the command line gives them, before the model's
// recipe fills what was left out (plan/run_plan.h). The flag table (plan/flags.h) binds each row to
// one field here. Defaults measured in milliseconds or bytes elsewhere are taken from the struct
// that uses them, so that each has one value in one unit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/cpu.h"
#include "data/data_options.h"
#include "train/allreduce_trainer.h"
#include "train/ps_trainer.h"
#include "train/train_config.h"

namespace dtrain {

struct FlagValues {
  std::string model = "mnist_inference";
  std::string strategy = "local";
  int hidden_units = ModelConfig{}.hidden_units;
  int batch_size = TrainConfig{}.batch_size;
  // Keras' defaults (Adam, lr 1e-3, no decay, no moving average, 10 epochs), which the model's
  // recipe replaces where it names them and the flag is not on the command line.
  float learning_rate = 0.001f;
  float lr_decay_rate = 1;
  std::string lr_schedule = "exponential";
  int64_t lr_decay_steps = 0;
  float lr_alpha = 0;
  std::vector<int64_t> lr_boundaries;
  std::vector<float> lr_values;
  int64_t lr_warmup_steps = 0;
  float moving_average_decay = 0;
  float l2 = 0;
  std::string optimizer = "adam";
  // The optimizer's hyper-parameters. Those whose default depends on the optimizer (momentum,
  // epsilon, weight decay) are read only when given; the others default as OptimizerConfig does.
  float momentum = 0;
  bool nesterov = false;
  float beta_1 = OptimizerConfig{}.beta1;
  float beta_2 = OptimizerConfig{}.beta2;
  float epsilon = 0;
  float rho = OptimizerConfig{}.rho;
  bool centered = false;
  float initial_accumulator_value = OptimizerConfig{}.initial_accumulator_value;
  float weight_decay = 0;
  float clipnorm = 0, global_clipnorm = 0, clipvalue = 0;  // 0: off
  int64_t train_steps = 0;
  double epochs = 10;
  std::string data_dir;
  std::string train_data, test_data;
  DataOptions data_options;  // --data_format, --compression, ... (bound by cli/data_flags.cc)
  int64_t shuffle_buffer = 0;
  std::string train_dir;
  bool resume = false;     // go on from --train_dir's checkpoint even with changed settings
  bool overwrite = false;  // delete --train_dir's checkpoints and start afresh
  std::string logdir;
  int64_t summary_steps = TrainConfig{}.summary_steps;
  int64_t validation_size = TrainConfig{}.validation_size;
  uint64_t seed = TrainConfig{}.seed;
  int threads = available_cores();
  int towers = 1;
  std::string precision = "fp32";
  int64_t log_every = TrainConfig{}.log_every;
  double log_secs = TrainConfig{}.log_secs;
  int64_t save_steps = 0;
  double save_secs = 0;
  double shutdown_timeout = TrainConfig{}.shutdown_timeout_ms / 1000.0;  // seconds
  int keep_checkpoints = TrainConfig{}.keep_checkpoints;
  int64_t eval_every = 0;
  double target_accuracy = 0;
  int64_t early_stopping_patience = 0;
  bool eval_each_epoch = false;
  bool progress = true;
  bool progress_through_launcher = false;
  bool local_task = false;  // started by the local launcher, which has said what it decided
  std::vector<int64_t> inject_nonfinite_at;
  int step_delay_ms = 0;
  std::string record_examples;
  int metrics_port = -1;  // -1: no metrics endpoint
  // The local launcher.
  int ps = 1;
  int workers = 2;
  int max_restarts = 3;
  int min_workers = 0;  // 0: not elastic
  int max_workers = 0;  // 0: --workers
  std::string join;     // the coordinator of an elastic job this task joins
  // What an elastic job keeps at a change: each worker's batch, or the global batch.
  std::string elastic_batch = "worker";
  // A task's place in a cluster.
  std::string ps_hosts, worker_hosts, job_name, rendezvous, bind, cluster_file, secret_file;
  int task_index = 0;
  bool unauthenticated_frames = false;
  // The ps strategies.
  bool sync_replicas = false;
  int replicas_to_aggregate = 0;
  int total_num_replicas = 0;
  std::string placement = "balanced";
  uint64_t min_shard_bytes = default_ps_cluster_config().min_shard_bytes;
  int peer_timeout = default_ps_cluster_config().peer_timeout_ms / 1000;          // seconds
  int worker_timeout = default_ps_cluster_config().worker_timeout_ms / 1000;      // seconds
  int liveness_timeout = default_ps_cluster_config().liveness_timeout_ms / 1000;  // seconds
  std::string on_worker_loss = "stop";
  // The allreduce strategy.
  uint64_t fusion_bytes = default_allreduce_cluster_config().fusion_bytes;
  int collective_timeout =
      default_allreduce_cluster_config().collective_timeout_ms / 1000;  // seconds
  std::string transport = "auto";
  std::string tcp_congestion = "auto";  // comm/tcp_congestion.h
  // A wait on a peer reported past this many seconds (0: never).
  double stall_warning = default_allreduce_cluster_config().stall_warning_ms / 1000.0;
};

}  // namespace dtrain
