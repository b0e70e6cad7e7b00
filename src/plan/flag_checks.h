// The checks of the flag table's rows (plan/flags.h), one per flag or group of flags that are
// judged together. Each throws UsageError naming the flag and its value; `cluster_workers` as in
// FlagCheck.
#pragma once

#include <string>

#include "tensor/blas.h"

namespace dtrain {

// --precision's value as a command outside the flag table takes it (dtrain eval, bench train):
// the same refusals as check_precision, for a name that is no precision or one this CPU cannot
// run.
Precision usable_precision(const std::string& name);

struct RunPlan;

namespace flag_checks {

void check_batch_size(const RunPlan& plan, int cluster_workers);
void check_model(const RunPlan& plan, int cluster_workers);
void check_learning_rate(const RunPlan& plan, int cluster_workers);
void check_lr_decay_rate(const RunPlan& plan, int cluster_workers);
void check_lr_schedule(const RunPlan& plan, int cluster_workers);
void check_optimizer(const RunPlan& plan, int cluster_workers);
void check_moving_average_decay(const RunPlan& plan, int cluster_workers);
void check_l2(const RunPlan& plan, int cluster_workers);
void check_train_steps(const RunPlan& plan, int cluster_workers);
void check_epochs(const RunPlan& plan, int cluster_workers);
void check_data_pair(const RunPlan& plan, int cluster_workers);
void check_label_column(const RunPlan& plan, int cluster_workers);
void check_shuffle_buffer(const RunPlan& plan, int cluster_workers);
void check_validation_size(const RunPlan& plan, int cluster_workers);
void check_threads(const RunPlan& plan, int cluster_workers);
void check_precision(const RunPlan& plan, int cluster_workers);
void check_towers(const RunPlan& plan, int cluster_workers);
void check_shutdown_timeout(const RunPlan& plan, int cluster_workers);
void check_evaluation(const RunPlan& plan, int cluster_workers);
void check_target_accuracy(const RunPlan& plan, int cluster_workers);
void check_inject_nonfinite_at(const RunPlan& plan, int cluster_workers);
void check_sync_counts(const RunPlan& plan, int cluster_workers);
void check_fusion_bytes(const RunPlan& plan, int cluster_workers);
void check_ps_count(const RunPlan& plan, int cluster_workers);
void check_workers(const RunPlan& plan, int cluster_workers);
void check_max_restarts(const RunPlan& plan, int cluster_workers);
void check_min_workers(const RunPlan& plan, int cluster_workers);
void check_max_workers(const RunPlan& plan, int cluster_workers);
void check_elastic_batch(const RunPlan& plan, int cluster_workers);
void check_metrics_port(const RunPlan& plan, int cluster_workers);
void check_tcp_congestion(const RunPlan& plan, int cluster_workers);

void check_summary_steps(const RunPlan& plan, int cluster_workers);
void check_log_every(const RunPlan& plan, int cluster_workers);
void check_log_secs(const RunPlan& plan, int cluster_workers);
void check_save_steps(const RunPlan& plan, int cluster_workers);
void check_save_secs(const RunPlan& plan, int cluster_workers);
void check_peer_timeout(const RunPlan& plan, int cluster_workers);
void check_worker_timeout(const RunPlan& plan, int cluster_workers);
void check_liveness_timeout(const RunPlan& plan, int cluster_workers);
void check_step_delay_ms(const RunPlan& plan, int cluster_workers);
void check_collective_timeout(const RunPlan& plan, int cluster_workers);
void check_stall_warning(const RunPlan& plan, int cluster_workers);

}  // namespace flag_checks
}  // namespace dtrain
