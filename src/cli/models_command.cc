// `dtrain models`: the built-in models with their parameter counts and layers; `--show NAME`
// prints a model's Keras JSON (a built-in name, or a .json file as --model takes it).
#include <fmt/format.h>

#include <iostream>

#include "cli/commands.h"
#include "nn/model_zoo.h"
#include "nn/param_set.h"

namespace dtrain::cli {
namespace {

void list_models(std::ostream& out) {
  for (const std::string& name : model_names()) {
    std::unique_ptr<Model> model = make_model({.name = name});
    int64_t parameters = 0;
    for (const ParamSpec& spec : model->param_specs()) parameters += num_elements(spec.shape);
    const bool sized = model_spec({.name = name}).hidden_units.has_value();
    out << fmt::format(
        "{}: {} parameters{}\n", name, parameters,
        sized ? fmt::format(" (with --hidden_units {})", ModelConfig{}.hidden_units) : "");
    for (const auto& layer : model->layers()) out << "  " << layer->describe() << "\n";
  }
}

}  // namespace

void add_models_command(CLI::App& app, Action& action) {
  auto show = std::make_shared<std::string>();
  CLI::App* cmd =
      app.add_subcommand("models", "List the built-in models, or show one's Keras JSON");
  cmd->add_option("--show", *show,
                  "Print this model's Keras JSON (a built-in name or a .json file)");
  cmd->callback([show, &action] {
    action = [show] {
      if (show->empty()) {
        list_models(std::cout);
      } else {
        std::cout << model_spec_json({.name = *show}).dump(2) << "\n";
      }
      return 0;
    };
  });
}

}  // namespace dtrain::cli
