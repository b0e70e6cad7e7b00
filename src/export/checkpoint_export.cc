// The graph, its metadata and the file.
#include "export/checkpoint_export.h"

#include <fmt/format.h>

#include "export/onnx_export.h"
#include "nn/keras_json.h"
#include "nn/keras_json_writer.h"

namespace dtrain {
namespace {

std::string shape_text(const Shape& shape) {
  std::string text = "[batch";
  for (size_t i = 1; i < shape.size(); ++i) text += fmt::format(",{}", shape[i]);
  return text + "]";
}

// What the graph's output is: a binary head keeps its sigmoid (export/onnx_graph.h).
bool outputs_probability(const OnnxGraph& graph) { return graph.output.name == "probability"; }

std::string output_meaning(const OnnxGraph& graph) {
  return outputs_probability(graph) ? "the probability of class 1, from the head's sigmoid"
                                    : "logits; softmax gives the class probabilities";
}

OnnxModelInfo model_info(const CheckpointModel& loaded, const OnnxGraph& graph,
                         const std::optional<FeatureScale>& scale) {
  const Checkpoint& ckpt = loaded.checkpoint;
  const nlohmann::json data = ckpt.config.value("data", nlohmann::json::object());
  // Old checkpoints do not record it; what dtrain has always done is the default.
  const std::string scaling =
      data.value("input_scaling", std::string("uint8 pixels / 255; float features as given"));
  const std::string input =
      scale ? fmt::format(
                  "the numeric features as the run's files held them: the graph multiplies them "
                  "by {} first, as dtrain's --feature_scale did",
                  scale->text)
            : fmt::format("the model's input after dtrain's input scaling ({})", scaling);
  // The export holds the model, not how dtrain trains it: the spec less its training defaults and
  // the layer --hidden_units sized.
  ModelSpec architecture = loaded.spec;
  architecture.defaults = nlohmann::json::object();
  architecture.hidden_units = std::nullopt;
  OnnxModelInfo info;
  info.doc_string = fmt::format(
      "dtrain model {} at global step {} ({} weights). Input {}: {}, images NHWC as Keras has "
      "them. Output {}: {}.",
      ckpt.model, ckpt.global_step, loaded.moving_average ? "moving-average" : "raw",
      shape_text(graph.input.shape), input, shape_text(graph.output.shape), output_meaning(graph));
  info.metadata = {
      {"dtrain_model", ckpt.model},
      {"global_step", std::to_string(ckpt.global_step)},
      {"weights", loaded.moving_average ? "moving_average" : "raw"},
      {"input_scaling", scaling},
      {"data_options", data_options_json(checkpoint_data_options(ckpt)).dump()},
      {"checkpoint", loaded.path.filename().string()},
      {"keras_model", to_keras_json(architecture).dump()},
      // The graph applies the scale itself: a runtime feeds it the features as the files hold
      // them, and gets what `dtrain predict` prints for those files.
      {"dtrain.feature_scale", scale ? scale->text : "none"},
      {"dtrain.feature_scale_in_graph", scale ? "true" : "false"},
  };
  return info;
}

}  // namespace

std::string export_onnx(const CheckpointModel& loaded, const std::filesystem::path& output) {
  const std::optional<FeatureScale> scale =
      checkpoint_data_options(loaded.checkpoint).feature_scale;
  const OnnxGraph graph = build_onnx_graph(loaded.spec, loaded.params, scale);
  write_onnx_model(output, graph, model_info(loaded, graph, scale));
  return fmt::format(
      "wrote {}: model {} at global step {}{}, input {} -> {} {}, {} nodes, opset {}",
      output.string(), loaded.checkpoint.model, loaded.checkpoint.global_step,
      loaded.moving_average ? " (moving average)" : "", shape_text(graph.input.shape),
      outputs_probability(graph) ? "probability" : "logits", shape_text(graph.output.shape),
      graph.nodes.size(), kOnnxOpset);
}

}  // namespace dtrain
