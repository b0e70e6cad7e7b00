// `dtrain predict --checkpoint PATH --input FILES [--output FILE.csv]`: the class and the class
// probabilities of every input record, as CSV (train/predict.h). The input is read as the run read
// its data (the checkpoint's data options) unless the data flags say otherwise; a CSV may hold the
// features alone, without a label column.
#include <fmt/format.h>

#include <iostream>
#include <sstream>

#include "base/atomic_file.h"
#include "cli/commands.h"
#include "data/data_files.h"
#include "train/predict.h"

namespace dtrain::cli {
namespace {

struct PredictFlags {
  std::string checkpoint;
  std::string input;
  std::string output;
  bool logits = false;
  DataOptions data_options;
};

int run_predict(const CLI::App& cmd, const PredictFlags& flags, CheckpointWeights weights) {
  const CheckpointModel loaded = load_checkpoint_model(flags.checkpoint, weights, std::cerr);
  if (!flags.output.empty()) refuse_output_over_checkpoint("--output", flags.output, loaded.path);
  DataOptions options =
      given_data_options(cmd, flags.data_options, checkpoint_data_options(loaded.checkpoint));
  // A CSV of the model's features alone, with no label column, is what inference data looks like.
  options.unlabelled_width = loaded.model->input_size();
  const Dataset data = load_examples(expand_data_paths(flags.input), options);
  // The run's scale is for numeric files; one given here for pixels would do nothing.
  if (cmd.count("--feature_scale") > 0) refuse_scale_for_pixels(data.notes, options, flags.input);
  check_input_fits(*loaded.model, data, flags.input);
  for (const std::string& warning : data.notes.warnings) std::cerr << warning << '\n';

  PredictionSummary summary;
  if (flags.output.empty()) {
    summary = write_predictions(*loaded.model, loaded.params, data, flags.logits, std::cout);
    std::cout.flush();
  } else {
    std::ostringstream csv;
    summary = write_predictions(*loaded.model, loaded.params, data, flags.logits, csv);
    AtomicFileWriter writer(flags.output, kSharedFileMode);
    writer.append(csv.view());
    writer.commit();
  }
  std::cerr << fmt::format(
      "predict: {} records of {}{}, model {} at global step {}{}; {}{}\n", summary.records,
      flags.input, flags.output.empty() ? "" : " to " + flags.output, loaded.checkpoint.model,
      loaded.checkpoint.global_step, loaded.moving_average ? " (moving average)" : "",
      describe_features(data.notes, options),
      data.notes.labelled ? fmt::format(": accuracy = {:.4f}", summary.accuracy) : "");
  return 0;
}

}  // namespace

void add_predict_command(CLI::App& app, Action& action) {
  auto flags = std::make_shared<PredictFlags>();
  CLI::App* cmd = app.add_subcommand(
      "predict", "Print the class and class probabilities of each input record, as CSV");
  cmd->add_option("--checkpoint", flags->checkpoint,
                  "A checkpoint file, or a --train_dir (its newest)")
      ->required();
  cmd->add_option("--input", flags->input,
                  "Input files, comma-separated files or globs (IDX, TFRecord of tf.train.Example, "
                  "CSV; read as the run read its data unless the flags below say otherwise)")
      ->required();
  cmd->add_option("--output", flags->output,
                  "The CSV file to write (replaced atomically; default: standard output)");
  cmd->add_flag("--logits", flags->logits, "Add the logits, logit_0... columns");
  add_data_option_flags(cmd, &flags->data_options, "as the checkpoint's run read its data");
  auto weights = std::make_shared<CheckpointWeights>(CheckpointWeights::kAsTrained);
  add_weights_flags(cmd, weights, "Predict with");
  cmd->callback([cmd, flags, weights, &action] {
    action = [cmd, flags, weights] { return run_predict(*cmd, *flags, *weights); };
  });
}

}  // namespace dtrain::cli
