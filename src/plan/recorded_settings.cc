// The flag table's recorded rows, and the recorded keys no flag owns, written into one JSON object.
#include "plan/recorded_settings.h"

#include <fmt/format.h>

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "data/data_options.h"
#include "nn/model_zoo.h"
#include "plan/flags.h"

namespace dtrain {
namespace {

// What the flags imply or what several flags make together, recorded whole.
constexpr std::array<Recorded, 5> kNotFlags = {{
    // --batch_size × the workers a step averages (train/train_config.h): another worker count
    // under all-reduce or sync is another recipe, with other steps per epoch. Null when unknown,
    // and then not compared.
    {"global_batch",
     [](const TrainConfig& c) -> nlohmann::json {
       return c.global_batch > 0 ? nlohmann::json(c.global_batch) : nlohmann::json();
     }},
    // The model's whole architecture (Keras JSON), so that any checkpoint rebuilds its model. The
    // resume check compares it by itself (train/resume_check.h).
    {"model_spec",
     [](const TrainConfig& c) { return nlohmann::json::parse(model_spec_json(c.model).dump()); },
     ResumeRule::kNotCompared},
    // --moving_average_decay > 0 turns it on, and a recipe may; it changes how the final
    // evaluation reads the weights, not training.
    {"eval_moving_average", recorded_member<&TrainConfig::eval_moving_average>,
     ResumeRule::kNotCompared},
    // The data flags of train, eval and predict (cli/data_flags.cc), as data/ writes them: each
    // under its flag's name.
    {"data.options", [](const TrainConfig& c) { return data_options_json(c.data_options); }},
    // How examples become the model's input: uint8 pixels (IDX, TFRecord bytes) scaled to [0, 1],
    // numeric features (CSV, float_list) times the feature scale. For people and `dtrain export`.
    {"data.input_scaling",
     [](const TrainConfig& c) -> nlohmann::json {
       const std::optional<FeatureScale>& scale = c.data_options.feature_scale;
       return fmt::format("uint8 pixels / 255; numeric features {}",
                          scale ? "× " + scale->text : std::string("as given"));
     },
     ResumeRule::kNotCompared},
}};

// `key`'s levels joined by '.' as a JSON pointer: "data.options" → /data/options.
nlohmann::json::json_pointer pointer_to(std::string_view key) {
  std::string path;
  path.reserve(key.size() + 1);
  path.push_back('/');
  for (const char c : key) path.push_back(c == '.' ? '/' : c);
  return nlohmann::json::json_pointer(path);
}

void record(nlohmann::json& settings, const Recorded& recorded, const TrainConfig& config) {
  settings[pointer_to(recorded.key)] = recorded.value(config);
}

}  // namespace

nlohmann::json recorded_settings(const TrainConfig& config) {
  nlohmann::json settings = nlohmann::json::object();
  for (const FlagSpec& flag : flag_table()) {
    if (flag.recorded.value != nullptr) record(settings, flag.recorded, config);
  }
  for (const Recorded& recorded : kNotFlags) record(settings, recorded, config);
  return settings;
}

const SettingsRecord& settings_record() {
  static const std::vector<RecordedKey> keys = [] {
    std::vector<RecordedKey> out;
    for (const FlagSpec& flag : flag_table()) {
      if (flag.recorded.value != nullptr)
        out.push_back({flag.recorded.key, flag.name, flag.recorded.rule});
    }
    for (const Recorded& recorded : kNotFlags) {
      // The one a user can change between runs, named by the flags that make it.
      const std::string_view shown = recorded.key == "global_batch"
                                         ? "the global batch (--batch_size × workers per step)"
                                         : "";
      out.push_back({recorded.key, shown, recorded.rule});
    }
    return out;
  }();
  static const SettingsRecord record{recorded_settings, keys};
  return record;
}

}  // namespace dtrain
