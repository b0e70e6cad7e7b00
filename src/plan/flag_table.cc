// The flag table's rows: per flag its name, heading, field, help, strategies, check and record
// (plan/flags.h says what each means). Split from flags.cc, which keeps the refusals and checks
// derived from the rows.
#include <algorithm>
#include <filesystem>

#include "comm/transport.h"
#include "data/data_files.h"
#include "plan/flag_checks.h"
#include "plan/flags.h"
#include "plan/optimizer_flags.h"
#include "plan/run_plan.h"

namespace dtrain {
namespace {

using namespace flag_checks;  // NOLINT: the table names a check per row

// Paths absolute, so that `dtrain eval` finds the data from any folder.
nlohmann::json recorded_data_dir(const TrainConfig& c) {
  return c.data_dir.empty() ? std::string()
                            : std::filesystem::absolute(c.data_dir).lexically_normal().string();
}
nlohmann::json recorded_train_data(const TrainConfig& c) {
  return absolute_data_paths(c.train_data);
}
nlohmann::json recorded_test_data(const TrainConfig& c) { return absolute_data_paths(c.test_data); }
nlohmann::json recorded_schedule(const TrainConfig& c) { return lr_decay_name(c.lr_schedule); }
nlohmann::json recorded_precision(const TrainConfig& c) { return precision_name(c.precision); }

constexpr StrategySet kTowersAndClusters = strategy_bit(StrategyKind::kTowers) | kClusterStrategies;
constexpr StrategySet kSyncOnly = strategy_bit(StrategyKind::kSync);
constexpr StrategySet kAllreduceOnly = strategy_bit(StrategyKind::kAllreduce);
constexpr StrategySet kOneProcess =
    strategy_bit(StrategyKind::kLocal) | strategy_bit(StrategyKind::kTowers);

// --help's headings.
constexpr std::string_view kModel = "Model";
constexpr std::string_view kTraining = "Training";
constexpr std::string_view kData = "Data";
constexpr std::string_view kEvaluationAndStopping = "Evaluation and stopping";
constexpr std::string_view kCheckpointsAndOutput = "Checkpoints and output";
constexpr std::string_view kLocalLauncher = "Local launcher";
constexpr std::string_view kElasticJobs = "Elastic jobs";
constexpr std::string_view kCluster = "Cluster";
constexpr std::string_view kParameterServers = "Parameter servers";
constexpr std::string_view kAllReduce = "All-reduce";
constexpr std::string_view kFaultInjection = "Fault injection";
constexpr std::string_view kHelpTopics[] = {kModel,
                                            kTraining,
                                            kData,
                                            kCheckpointsAndOutput,
                                            kEvaluationAndStopping,
                                            kFaultInjection,
                                            kLocalLauncher,
                                            kElasticJobs,
                                            kCluster,
                                            kParameterServers,
                                            kAllReduce};

std::vector<FlagSpec> make_table() {
  using F = FlagValues;
  std::vector<FlagSpec> table = {
      {.name = "--model",
       .topic = kModel,
       .field = &F::model,
       .help = "softmax | mlp | mnist_inference | lenet, or a Keras Sequential .json file",
       .show_default = true,
       .recorded = {"model", [](const TrainConfig& c) -> nlohmann::json { return c.model.name; },
                    ResumeRule::kNotResumable}},
      {.name = "--strategy",
       .topic = kTraining,
       .field = &F::strategy,
       .help = "local | towers | async | sync | allreduce (async and sync: parameter servers; "
               "allreduce: workers average gradients over a ring)",
       .show_default = true,
       .choices = {"local", "towers", "async", "sync", "allreduce"}},
      {.name = "--hidden_units",
       .topic = kModel,
       .field = &F::hidden_units,
       .help = "Hidden units of the layer a model's JSON names for them (mlp's)",
       .show_default = true,
       .check = check_model,
       .recorded = {"hidden_units",
                    [](const TrainConfig& c) -> nlohmann::json { return c.model.hidden_units; },
                    ResumeRule::kNotResumable}},
      {.name = "--batch_size",
       .topic = kTraining,
       .field = &F::batch_size,
       .help = "Examples per step (per worker)",
       .show_default = true,
       .check = check_batch_size,
       .recorded = {"batch_size", recorded_member<&TrainConfig::batch_size>}},
      {.name = "--learning_rate",
       .topic = kTraining,
       .field = &F::learning_rate,
       .help = "Initial learning rate (default: the model's recipe)",
       .recipe = true,
       .check = check_learning_rate,
       .recorded = {"learning_rate", recorded_member<&TrainConfig::learning_rate>}},
      {.name = "--lr_decay_rate",
       .topic = kTraining,
       .field = &F::lr_decay_rate,
       .help = "Exponential schedule: decay per --lr_decay_steps, staircase (1: none)",
       .recipe = true,
       .check = check_lr_decay_rate,
       .recorded = {"lr_decay_rate", recorded_member<&TrainConfig::lr_decay_rate>}},
      {.name = "--lr_schedule",
       .topic = kTraining,
       .field = &F::lr_schedule,
       .help = "exponential (--lr_decay_rate per --lr_decay_steps), cosine (to --lr_alpha of "
               "--learning_rate over --lr_decay_steps) or piecewise (--lr_values changing at "
               "--lr_boundaries); formulas in docs/training.md",
       .show_default = true,
       .choices = {"exponential", "cosine", "piecewise"},
       .check = check_lr_schedule,
       .recorded = {"lr_schedule.decay", recorded_schedule}},
      {.name = "--lr_decay_steps",
       .topic = kTraining,
       .field = &F::lr_decay_steps,
       .help = "Exponential: steps per --lr_decay_rate (default: one epoch); cosine: steps to "
               "reach --lr_alpha (default: the whole run)",
       .recorded = {"lr_schedule.decay_steps", recorded_member<&TrainConfig::lr_decay_steps>}},
      {.name = "--lr_alpha",
       .topic = kTraining,
       .field = &F::lr_alpha,
       .help = "Cosine: the final learning rate as a fraction of --learning_rate",
       .show_default = true,
       .recorded = {"lr_schedule.alpha", recorded_member<&TrainConfig::lr_alpha>}},
      {.name = "--lr_boundaries",
       .topic = kTraining,
       .field = &F::lr_boundaries,
       .help = "Piecewise: global steps where the rate changes, e.g. 1000,2000",
       .delimiter = ',',
       .recorded = {"lr_schedule.boundaries", recorded_member<&TrainConfig::lr_boundaries>}},
      {.name = "--lr_values",
       .topic = kTraining,
       .field = &F::lr_values,
       .help = "Piecewise: the rates, one more than boundaries, e.g. 0.1,0.01,0.001",
       .delimiter = ',',
       .recorded = {"lr_schedule.values", recorded_member<&TrainConfig::lr_values>}},
      {.name = "--lr_warmup_steps",
       .topic = kTraining,
       .field = &F::lr_warmup_steps,
       .help = "Linear warmup: the rate rises from 0 over these first global steps (any "
               "--lr_schedule)",
       .show_default = true,
       .recorded = {"lr_schedule.warmup_steps", recorded_member<&TrainConfig::lr_warmup_steps>}},
      {.name = "--optimizer",
       .topic = kTraining,
       .field = &F::optimizer,
       .help = "sgd | momentum | adam | rmsprop | adamw | adagrad | nadam (default: the model's "
               "recipe); sgd, momentum, adam: TensorFlow's rules, the others and sgd with "
               "--momentum: Keras 3's (docs/training.md)",
       .recipe = true,
       .check = check_optimizer,
       .recorded = {"optimizer",
                    [](const TrainConfig& c) -> nlohmann::json { return c.optimizer.name; },
                    ResumeRule::kNotResumable}},
      {.name = "--moving_average_decay",
       .topic = kTraining,
       .field = &F::moving_average_decay,
       .help = "Evaluate on an exponential moving average of the weights with this decay (0: off)",
       .recipe = true,
       .check = check_moving_average_decay,
       .recorded = {"moving_average_decay", recorded_member<&TrainConfig::moving_average_decay>}},
      {.name = "--l2",
       .topic = kTraining,
       .field = &F::l2,
       .help = "L2 regularisation coefficient on weights (default: the model's)",
       .check = check_l2},
      {.name = "--train_steps",
       .topic = kTraining,
       .field = &F::train_steps,
       .help = "Global step to stop at (overrides --epochs)",
       .check = check_train_steps},
      {.name = "--epochs",
       .topic = kTraining,
       .field = &F::epochs,
       .help = "Epochs to train (default: the model's recipe)",
       .recipe = true,
       .check = check_epochs},
      {.name = "--data_dir",
       .topic = kData,
       .field = &F::data_dir,
       .help = "MNIST folder (default $DTRAIN_DATA_DIR or ~/.cache/dtrain/mnist)",
       .recorded = {"data.data_dir", recorded_data_dir, ResumeRule::kNotCompared}},
      {.name = "--train_data",
       .topic = kData,
       .field = &F::train_data,
       .help = "Your training data: comma-separated files or globs (IDX, TFRecord of "
               "tf.train.Example, CSV; .gz/.zlib compressed or not); needs --test_data",
       .check = check_data_pair,
       .recorded = {"data.train_data", recorded_train_data}},
      {.name = "--test_data",
       .topic = kData,
       .field = &F::test_data,
       .help = "Your test data, as --train_data",
       .recorded = {"data.test_data", recorded_test_data, ResumeRule::kNotCompared}},
      {.name = "--label_column",
       .topic = kData,
       .field = std::monostate{},
       .check = check_label_column},
      {.name = "--shuffle_buffer",
       .topic = kData,
       .field = &F::shuffle_buffer,
       .help = "Stream the --train_data files through a shuffle buffer of this many examples "
               "(tf.data's shuffle) instead of holding them in memory (0: in memory)",
       .show_default = true,
       .check = check_shuffle_buffer},
      {.name = "--train_dir",
       .topic = kCheckpointsAndOutput,
       .field = &F::train_dir,
       .help = "Checkpoints, metrics.jsonl and TensorBoard event files; a run resumes from its "
               "newest checkpoint, and refuses one of other settings (see --resume, "
               "--overwrite)"},
      {.name = "--resume",
       .topic = kCheckpointsAndOutput,
       .field = &F::resume,
       .help = "Go on from --train_dir's checkpoint although settings that change the result "
               "(learning rate, batch size, data, ...) differ from its run's",
       .is_switch = true},
      {.name = "--overwrite",
       .topic = kCheckpointsAndOutput,
       .field = &F::overwrite,
       .help = "Delete --train_dir's checkpoints (and metrics.jsonl) and start afresh",
       .is_switch = true},
      {.name = "--logdir",
       .topic = kCheckpointsAndOutput,
       .field = &F::logdir,
       .help = "TensorBoard event files (default: --train_dir): the chief's, and each "
               "worker's in worker_<N>/"},
      {.name = "--summary_steps",
       .topic = kCheckpointsAndOutput,
       .field = &F::summary_steps,
       .help = "Histograms of every variable and averaged gradient every N global steps, in "
               "the event files (0: none)",
       .show_default = true,
       .check = check_summary_steps},
      {.name = "--validation_size",
       .topic = kData,
       .field = &F::validation_size,
       .help = "Training examples held out as the validation set that --eval_every, "
               "--target_accuracy and --early_stopping_patience judge (default 5000 of MNIST, "
               "none of --train_data)",
       .show_default = true,
       .check = check_validation_size,
       .recorded = {"validation_size", recorded_member<&TrainConfig::validation_size>}},
      {.name = "--seed",
       .topic = kTraining,
       .field = &F::seed,
       .help = "Seed of initialisation and shuffling",
       .show_default = true,
       .recorded = {"seed", recorded_member<&TrainConfig::seed>}},
      {.name = "--threads",
       .topic = kTraining,
       .field = &F::threads,
       .help = "Compute threads that split every large matrix product (default: the cores "
               "this process may use)",
       .show_default = true,
       .check = check_threads},
      {.name = "--towers",
       .topic = kTraining,
       .field = &F::towers,
       .help = "Model replicas on separate threads (--strategy towers)",
       .show_default = true,
       .strategies = kTowersAndClusters,
       .hint_under = strategy_bit(StrategyKind::kLocal),
       .hint = "{0} {1}: needs --strategy towers",
       .check = check_towers,
       .recorded = {"towers", recorded_member<&TrainConfig::towers>, ResumeRule::kNotCompared}},
      {.name = "--precision",
       .topic = kTraining,
       .field = &F::precision,
       .help = "fp32 | bf16: the training steps' matrix products and convolutions on bf16 "
               "inputs with fp32 sums (oneDNN's AMX or AVX512-BF16 kernels); weights, optimizer "
               "and evaluation stay fp32",
       .show_default = true,
       .choices = {"fp32", "bf16"},
       .check = check_precision,
       .recorded = {"precision", recorded_precision}},
      {.name = "--log_every",
       .topic = kCheckpointsAndOutput,
       .field = &F::log_every,
       .help = "Print a step line every N steps, at least once an epoch (0: never)",
       .show_default = true,
       .check = check_log_every},
      {.name = "--log_secs",
       .topic = kCheckpointsAndOutput,
       .field = &F::log_secs,
       .help = "Print a step line also when S seconds have passed since the last (0: by "
               "steps alone)",
       .show_default = true,
       .check = check_log_secs},
      {.name = "--save_steps",
       .topic = kCheckpointsAndOutput,
       .field = &F::save_steps,
       .help = "Checkpoint every N steps (0: at the end only)",
       .show_default = true,
       .check = check_save_steps},
      {.name = "--save_secs",
       .topic = kCheckpointsAndOutput,
       .field = &F::save_secs,
       .help = "Checkpoint every S seconds (0: off)",
       .check = check_save_secs},
      {.name = "--shutdown_timeout",
       .topic = kCheckpointsAndOutput,
       .field = &F::shutdown_timeout,
       .help = "On SIGTERM, SIGHUP or SIGINT: stop at the next step, the chief checkpoints, and "
               "every task exits within this many seconds (a second signal: at once)",
       .show_default = true,
       .check = check_shutdown_timeout},
      {.name = "--keep_checkpoints",
       .topic = kCheckpointsAndOutput,
       .field = &F::keep_checkpoints,
       .help = "Checkpoints kept (0: all)",
       .show_default = true},
      {.name = "--eval_every",
       .topic = kEvaluationAndStopping,
       .field = &F::eval_every,
       .help = "Evaluate the validation set (--validation_size) every N steps (0: never); the "
               "test set is evaluated once, at the end",
       .show_default = true,
       .check = check_evaluation},
      {.name = "--target_accuracy",
       .topic = kEvaluationAndStopping,
       .field = &F::target_accuracy,
       .help = "Stop once validation accuracy reaches this",
       .check = check_target_accuracy},
      // Python's fit with validation data: an evaluation at each epoch's end, as Keras's.
      {.name = "--eval_each_epoch",
       .field = &F::eval_each_epoch,
       .is_switch = true,
       .hidden = true},
      {.name = "--early_stopping_patience",
       .topic = kEvaluationAndStopping,
       .field = &F::early_stopping_patience,
       .help = "Stop after N evaluations (--eval_every) without a lower validation loss, keep "
               "the best weights in train_dir/best/ and evaluate them on the test set (0: off)",
       .show_default = true},
      {.name = "--no_progress",
       .topic = kCheckpointsAndOutput,
       .field = &F::progress,
       .help = "No progress bar even on a terminal",
       .is_switch = true,
       .negates = true},
      {.name = "--progress_through_launcher",
       .field = &F::progress_through_launcher,
       .is_switch = true,
       .hidden = true},
      // The local launcher's word to its tasks: it has said where each runs, settled --train_dir's
      // checkpoint for them and judged --threads, so they say none of that again.
      {.name = "--local_task", .field = &F::local_task, .is_switch = true, .hidden = true},
      {.name = "--inject_nonfinite_at",
       .topic = kFaultInjection,
       .field = &F::inject_nonfinite_at,
       .help = "Fault injection: put a NaN into this task's gradient at these of its own "
               "steps (from 1), to watch it be refused",
       .delimiter = ',',
       .strategies = kClusterStrategies,
       .hint_under = kOneProcess,
       .hint =
           "{0}: the {2} strategy has nobody to refuse the gradient; use --strategy async, sync "
           "or allreduce",
       .check = check_inject_nonfinite_at},
      {.name = "--ps",
       .topic = kLocalLauncher,
       .field = &F::ps,
       .help = "ps tasks the local launcher starts; under mpirun, srun or torchrun-style "
               "variables, ranks 0..P-1 (--strategy async|sync)",
       .show_default = true,
       .strategies = kPsStrategies,
       .hint_under = kAllreduceOnly,
       .hint =
           "{0} {1}: the allreduce strategy has no ps tasks (the workers average their gradients "
           "among themselves); leave --ps out",
       .launcher_only = true,
       .check = check_ps_count,
       .when = CheckWhen::kLocalLauncher},
      {.name = "--workers",
       .topic = kLocalLauncher,
       .field = &F::workers,
       .help = "Workers the local launcher starts (--strategy async|sync|allreduce)",
       .show_default = true,
       .strategies = kClusterStrategies,
       .launcher_only = true,
       .check = check_workers,
       .when = CheckWhen::kLocalLauncher},
      {.name = "--max_restarts",
       .topic = kLocalLauncher,
       .field = &F::max_restarts,
       .help = "Crashed tasks the local launcher starts again (ps strategies: that task, "
               "which reconnects; allreduce: the whole group, from the newest checkpoint)",
       .show_default = true,
       .strategies = kClusterStrategies,
       .launcher_only = true,
       .check = check_max_restarts,
       .when = CheckWhen::kLocalLauncher},
      {.name = "--min_workers",
       .topic = kElasticJobs,
       .field = &F::min_workers,
       .help = "Elastic allreduce and sync: the job goes on while at least N workers remain; a "
               "worker that is killed or gets SIGTERM leaves, a restarted one joins, without a "
               "restart of the others (docs/elastic.md; 0: not elastic)",
       .show_default = true,
       .strategies = strategy_bit(StrategyKind::kAllreduce) | strategy_bit(StrategyKind::kSync),
       .launcher_only = true,
       .check = check_min_workers,
       .when = CheckWhen::kLocalLauncher},
      {.name = "--max_workers",
       .topic = kElasticJobs,
       .field = &F::max_workers,
       .help = "Elastic allreduce, and async: workers the job takes at most, those that join it "
               "included (0: --workers)",
       .show_default = true,
       .strategies = strategy_bit(StrategyKind::kAllreduce) | strategy_bit(StrategyKind::kAsync),
       .launcher_only = true,
       .check = check_max_workers,
       .when = CheckWhen::kLocalLauncher},
      {.name = "--elastic_batch",
       .topic = kElasticJobs,
       .field = &F::elastic_batch,
       .help = "Elastic all-reduce: what a membership change keeps, each worker's batch "
               "(the global batch follows the workers) or the global batch (--workers x "
               "--batch_size, split over the workers there are)",
       .show_default = true,
       .choices = {"worker", "global"},
       .strategies = strategy_bit(StrategyKind::kAllreduce),
       .check = check_elastic_batch,
       .when = CheckWhen::kLocalLauncher},
      {.name = "--join",
       .topic = kElasticJobs,
       .field = &F::join,
       .help = "dtrain task: join a running job, with its training flags and secret: an "
               "elastic allreduce job at its coordinator's HOST:PORT (dtrain train prints it), as "
               "worker<--task_index>; an async job at its ps0's, which hands it the next free "
               "identity",
       .strategies = strategy_bit(StrategyKind::kAllreduce) | strategy_bit(StrategyKind::kAsync)},
      {.name = "--ps_hosts",
       .topic = kCluster,
       .field = &F::ps_hosts,
       .help = "Cluster: ps tasks, host:port,host:port"},
      {.name = "--worker_hosts",
       .topic = kCluster,
       .field = &F::worker_hosts,
       .help = "Cluster: workers, host:port,... (without --ps_hosts: an all-reduce ring)"},
      {.name = "--job_name",
       .topic = kCluster,
       .field = &F::job_name,
       .help = "Cluster: this task's job, ps or worker"},
      {.name = "--rendezvous",
       .topic = kCluster,
       .field = &F::rendezvous,
       .help = "Under mpirun, srun or torchrun-style RANK/WORLD_SIZE: HOST:PORT where rank 0 "
               "listens for the other ranks (default MASTER_ADDR:MASTER_PORT; under Slurm the "
               "job's first node, port 29500)"},
      {.name = "--bind",
       .topic = kCluster,
       .field = &F::bind,
       .help = "Cluster: the address this task listens on (default: its own address in the "
               "cluster spec when that is this host's, else every interface)",
       .strategies = kClusterStrategies},
      {.name = "--task_index",
       .topic = kCluster,
       .field = &F::task_index,
       .help = "Cluster: this task's index in its job",
       .show_default = true},
      {.name = "--cluster",
       .topic = kCluster,
       .field = &F::cluster_file,
       .help = "Cluster: a JSON file shaped like TF_CONFIG (TF_CONFIG itself is read too)"},
      {.name = "--secret_file",
       .topic = kCluster,
       .field = &F::secret_file,
       .help = "File holding the cluster secret (default: $DTRAIN_SECRET)"},
      {.name = "--unauthenticated_frames",
       .topic = kCluster,
       .field = &F::unauthenticated_frames,
       .help = "Cluster: skip the per-frame authentication tag (a CRC only) after the handshake; "
               "every task must be given it, and each warns that its frames can be altered",
       .is_switch = true,
       .strategies = kClusterStrategies},
      {.name = "--sync_replicas",
       .topic = kParameterServers,
       .field = &F::sync_replicas,
       .help = "Synchronous updates: aggregate --replicas_to_aggregate gradients per step",
       .is_switch = true,
       .strategies = kPsStrategies},
      {.name = "--replicas_to_aggregate",
       .topic = kParameterServers,
       .field = &F::replicas_to_aggregate,
       .help = "Sync: gradients averaged per step (default: all workers; fewer leaves backup "
               "workers)",
       .strategies = kSyncOnly,
       .check = check_sync_counts,
       .when = CheckWhen::kUnderItsStrategies},
      {.name = "--total_num_replicas",
       .topic = kParameterServers,
       .field = &F::total_num_replicas,
       .help = "Sync: workers that push (default: all workers)",
       .strategies = kSyncOnly},
      {.name = "--placement",
       .topic = kParameterServers,
       .field = &F::placement,
       .help = "balanced | round_robin",
       .show_default = true,
       .choices = {"balanced", "round_robin"},
       .strategies = kPsStrategies},
      {.name = "--min_shard_bytes",
       .topic = kParameterServers,
       .field = &F::min_shard_bytes,
       .help = "balanced: variables above this are split over the ps tasks",
       .show_default = true,
       .strategies = kPsStrategies},
      {.name = "--peer_timeout",
       .topic = kParameterServers,
       .field = &F::peer_timeout,
       .help = "Seconds to wait for a peer: to connect, for the chief, for a sync step",
       .show_default = true,
       .strategies = kPsStrategies,
       .check = check_peer_timeout,
       .when = CheckWhen::kUnderItsStrategies},
      {.name = "--worker_timeout",
       .topic = kParameterServers,
       .field = &F::worker_timeout,
       .help = "ps: seconds a lost worker (its connection closed before it was done) has to "
               "come back before the ps goes on without it; also how long a ps waits, once "
               "training is over, for a worker that never connected",
       .show_default = true,
       .strategies = kPsStrategies,
       .check = check_worker_timeout,
       .when = CheckWhen::kUnderItsStrategies},
      {.name = "--liveness_timeout",
       .topic = kParameterServers,
       .field = &F::liveness_timeout,
       .help = "ps strategies: seconds without any answer from a peer's host, heartbeats "
               "included, before it is declared lost (a dead machine or a cut link)",
       .show_default = true,
       .strategies = kPsStrategies,
       .check = check_liveness_timeout,
       .when = CheckWhen::kUnderItsStrategies},
      {.name = "--on_worker_loss",
       .topic = kParameterServers,
       .field = &F::on_worker_loss,
       .help = "sync ps, when a lost worker leaves too few for a step: stop (fail, naming it) "
               "or continue (fewer gradients per step)",
       .show_default = true,
       .choices = {"stop", "continue"},
       .strategies = kPsStrategies},
      {.name = "--step_delay_ms",
       .topic = kFaultInjection,
       .field = &F::step_delay_ms,
       .help = "Sleep before each step: a deliberate straggler, to try backup workers",
       .check = check_step_delay_ms},
      {.name = "--record_examples", .field = &F::record_examples, .hidden = true},
      {.name = "--metrics_port",
       .topic = kCheckpointsAndOutput,
       .field = &F::metrics_port,
       .help = "Serve this task's metrics for Prometheus at http://ADDR:PORT/metrics (a local "
               "cluster's task i on PORT+i; 0: free ports, printed; -1: none)",
       .show_default = true,
       .check = check_metrics_port},
      {.name = "--fusion_bytes",
       .topic = kAllReduce,
       .field = &F::fusion_bytes,
       .help = "allreduce: all-reduce the gradients in buckets of at most this many bytes, "
               "one after another (0: all of them in one buffer)",
       .show_default = true,
       .strategies = kAllreduceOnly,
       .check = check_fusion_bytes,
       .when = CheckWhen::kUnderItsStrategies},
      {.name = "--collective_timeout",
       .topic = kAllReduce,
       .field = &F::collective_timeout,
       .help = "allreduce: seconds to wait for the ring to form and for any message in it; a "
               "lost or stuck worker fails every other, named, within this",
       .show_default = true,
       .strategies = kAllreduceOnly,
       .check = check_collective_timeout,
       .when = CheckWhen::kUnderItsStrategies},
      {.name = "--stall_warning",
       .topic = kCluster,
       .field = &F::stall_warning,
       .help = "Seconds a worker waits on a peer inside a step before it says whom it waits for "
               "and why, naming the rank that holds the job up, again at doubling intervals "
               "(0: never)",
       .show_default = true,
       .strategies = kClusterStrategies,
       .check = check_stall_warning,
       .when = CheckWhen::kUnderItsStrategies},
      {.name = "--transport",
       .topic = kCluster,
       .field = &F::transport,
       .help = transport_help(),
       .show_default = true,
       .choices = transport_names(),
       .strategies = kClusterStrategies},
      {.name = "--tcp_congestion",
       .topic = kCluster,
       .field = &F::tcp_congestion,
       .help = "Cluster: the TCP congestion control of every link: auto (cubic where the kernel "
               "lets this task set it -- with CAP_NET_ADMIN any algorithm it has, without it one "
               "net.ipv4.tcp_allowed_congestion_control lists -- else the host's own), host (the "
               "host's own, net.ipv4.tcp_congestion_control), or a name this task may set (bbr, "
               "reno, ...)",
       .show_default = true,
       .strategies = kClusterStrategies,
       .check = check_tcp_congestion},
  };
  // The optimizer's hyper-parameters (plan/optimizer_flags.h), in --help after --optimizer, under
  // its heading.
  const auto after = std::find_if(table.begin(), table.end(),
                                  [](const FlagSpec& f) { return f.name == "--optimizer"; });
  std::vector<FlagSpec> optimizer = optimizer_rows();
  for (FlagSpec& row : optimizer) row.topic = kTraining;
  table.insert(after + 1, optimizer.begin(), optimizer.end());
  return table;
}

}  // namespace

std::span<const FlagSpec> flag_table() {
  static const std::vector<FlagSpec> table = make_table();
  return table;
}

std::span<const std::string_view> help_topics() { return kHelpTopics; }

const FlagSpec* find_flag(std::string_view name) {
  for (const FlagSpec& flag : flag_table()) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

}  // namespace dtrain
