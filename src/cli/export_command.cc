// `dtrain export --checkpoint PATH --output model.onnx`: a checkpoint's model, with the weights the
// run evaluated, as an ONNX model (src/export/). The flags and the metadata; the graph is
// export/onnx_graph.h.
#include <fmt/format.h>

#include <iostream>

#include "cli/commands.h"
#include "export/checkpoint_export.h"

namespace dtrain::cli {
namespace {}  // namespace

void add_export_command(CLI::App& app, Action& action) {
  auto checkpoint = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "export", "Write a checkpoint's model, with the weights the run evaluated, as ONNX");
  cmd->add_option("--checkpoint", *checkpoint, "A checkpoint file, or a --train_dir (its newest)")
      ->required();
  cmd->add_option("--output", *output, "The .onnx file to write (replaced atomically)")->required();
  auto weights = std::make_shared<CheckpointWeights>(CheckpointWeights::kAsTrained);
  add_weights_flags(cmd, weights, "Export");
  cmd->callback([checkpoint, output, weights, &action] {
    action = [checkpoint, output, weights] {
      const CheckpointModel loaded = load_checkpoint_model(*checkpoint, *weights, std::cerr);
      refuse_output_over_checkpoint("--output", *output, loaded.path);
      fmt::print("{}\n", export_onnx(loaded, *output));
      return 0;
    };
  });
}

}  // namespace dtrain::cli
