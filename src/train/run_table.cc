// One line per topic, two spaces in, so a log shows what ran beside what it printed.
#include "train/run_table.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "tensor/bf16_gemm.h"
#include "train/gradient_computer.h"

namespace dtrain {

void print_run_table(std::ostream& out, const RunTable& t) {
  const TrainConfig& c = t.config;
  fmt::print(out, "{}dtrain train: strategy {}\n", t.prefix, t.strategy);
  fmt::print(out, "  model        {} ({} parameters, L2 {})\n", t.model.name(), t.parameters,
             t.model.l2());
  for (const auto& layer : t.model.layers()) fmt::print(out, "    {}\n", layer->describe());
  fmt::print(
      out, "  optimizer    {}, learning rate {}{}\n", t.optimizer, t.schedule.describe(),
      c.moving_average_decay > 0 ? fmt::format(", moving average {}", c.moving_average_decay) : "");
  if (!c.optimizer_note.empty()) fmt::print(out, "               {}\n", c.optimizer_note);
  fmt::print(out, "  batch        {}{} ({} global steps per epoch), {} steps\n", c.batch_size,
             t.place.workers > 1 ? fmt::format(" per worker × {}", t.place.workers) : "",
             t.steps_per_epoch, t.total_steps);
  fmt::print(out, "  threads      {} ({} tower(s) of {} thread(s)), kernels {}\n", c.threads,
             c.towers, threads_per_tower(c.threads, c.towers), t.model.kernels());
  if (c.precision == Precision::kBf16) {
    fmt::print(out,
               "  precision    bf16 products with fp32 sums ({}), fp32 weights, optimizer and "
               "evaluation\n",
               bf16_gemm_implementation(c.batch_size, 512, 512));
  }
  fmt::print(out, "  data         {}\n", t.input.describe());
  for (const std::string& warning : t.input.warnings()) fmt::print(out, "  {}\n", warning);
  if (t.eval_every > 0) {
    fmt::print(out, "  evaluation   every {} steps on {} validation examples{}{}\n", t.eval_every,
               t.validation_examples,
               c.target_accuracy ? fmt::format(", stop at accuracy {}", *c.target_accuracy) : "",
               c.early_stopping_patience > 0
                   ? fmt::format(", stop after {} without a lower loss (keeping the best)",
                                 c.early_stopping_patience)
                   : "");
  }
  if (!c.train_dir.empty()) {
    fmt::print(out, "  train_dir    {}\n", c.train_dir.string());
  } else {
    fmt::print(out,
               "  train_dir    none: nothing will be saved (no checkpoints, no metrics.jsonl{})\n",
               c.logdir.empty() ? ", no TensorBoard events"
                                : fmt::format("; TensorBoard events go to {}", c.logdir.string()));
  }
  out << std::flush;
}

}  // namespace dtrain
