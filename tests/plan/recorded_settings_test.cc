// What checkpoints record (plan/recorded_settings.h), derived from the flag table: byte for byte
// what the hand-written train_config_json recorded before the derivation, so that old checkpoints
// resume and evaluate as they did.
#include "plan/recorded_settings.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "data/data_files.h"
#include "data/data_options.h"
#include "data/feature_scale.h"
#include "nn/model_zoo.h"
#include "plan/flags.h"
#include "plan/recipes.h"
#include "support/plan_args.h"
#include "support/temp_dir.h"

namespace dtrain::testing {
namespace {

// train_config_json as it was written by hand before the flag table recorded its rows (at
// d375f3b), kept as the reference of the format; "optimizer_config" came with the optimizers'
// hyper-parameter flags and "precision" with --precision (an older checkpoint lacks them, and the
// resume check skips what it lacks).
nlohmann::json hand_written_config_json(const TrainConfig& c) {
  const OptimizerConfig& o = c.optimizer;
  const EffectiveOptimizer e = optimizer_defaults(o);
  return {{"model", c.model.name},
          {"optimizer_config",
           {{"momentum", e.momentum},
            {"nesterov", o.use_nesterov},
            {"beta_1", o.beta1},
            {"beta_2", o.beta2},
            {"epsilon", e.epsilon},
            {"rho", o.rho},
            {"centered", o.centered},
            {"initial_accumulator_value", o.initial_accumulator_value},
            {"weight_decay", e.weight_decay},
            {"clipnorm", o.clipnorm},
            {"global_clipnorm", o.global_clipnorm},
            {"clipvalue", o.clipvalue}}},
          {"model_spec", nlohmann::json::parse(model_spec_json(c.model).dump())},
          {"hidden_units", c.model.hidden_units},
          {"optimizer", c.optimizer.name},
          {"batch_size", c.batch_size},
          {"learning_rate", c.learning_rate},
          {"lr_decay_rate", c.lr_decay_rate},
          {"lr_schedule",
           {{"decay", lr_decay_name(c.lr_schedule)},
            {"decay_steps", c.lr_decay_steps},
            {"alpha", c.lr_alpha},
            {"boundaries", c.lr_boundaries},
            {"values", c.lr_values},
            {"warmup_steps", c.lr_warmup_steps}}},
          {"moving_average_decay", c.moving_average_decay},
          {"eval_moving_average", c.eval_moving_average},
          {"seed", c.seed},
          {"validation_size", c.validation_size},
          {"towers", c.towers},
          {"precision", precision_name(c.precision)},
          {"data",
           {{"data_dir", c.data_dir.empty()
                             ? std::string()
                             : std::filesystem::absolute(c.data_dir).lexically_normal().string()},
            {"train_data", absolute_data_paths(c.train_data)},
            {"test_data", absolute_data_paths(c.test_data)},
            {"options", data_options_json(c.data_options)},
            {"input_scaling",
             fmt::format("uint8 pixels / 255; numeric features {}",
                         c.data_options.feature_scale ? "× " + c.data_options.feature_scale->text
                                                      : std::string("as given"))}}}};
}

const char kKerasModel[] = R"({"class_name": "Sequential", "config": {"name": "tiny", "layers": [
    {"class_name": "InputLayer", "config": {"batch_shape": [null, 6]}},
    {"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}}]}})";

// Configs as the plan makes them from flags, and then as no flag can (the data options, which
// cli/data_flags.cc binds outside the table, and a recipe's moving average).
std::vector<TrainConfig> configs(const TempDir& dir) {
  write_bytes(dir / "tiny.json", kKerasModel);
  std::vector<TrainConfig> out;
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {},
           {"--model", "mlp", "--hidden_units", "17", "--optimizer", "adam", "--batch_size", "7",
            "--seed", "9", "--strategy", "towers"},
           {"--model", "lenet", "--lr_schedule", "cosine", "--lr_decay_steps", "300", "--lr_alpha",
            "0.05", "--lr_warmup_steps", "20", "--moving_average_decay", "0.999"},
           {"--lr_schedule", "piecewise", "--lr_boundaries", "10,20", "--lr_values",
            "0.5,0.25,0.125", "--validation_size", "0", "--data_dir", "relative/../mnist"},
           {"--model", (dir / "tiny.json").string(), "--train_data",
            (dir / "*.csv").string() + "," + (dir / "extra.csv").string(), "--test_data",
            "test.csv", "--learning_rate", "0.3", "--lr_decay_rate", "0.9"},
       }) {
    out.push_back(plan_of(args).config);
  }
  TrainConfig csv = out.back();
  csv.data_options.format = DataFormat::kCsv;
  csv.data_options.compression = Compression::kGzip;
  csv.data_options.label_column = "y";
  csv.data_options.feature_scale = parse_feature_scale("1/255");
  out.push_back(csv);
  TrainConfig tfrecord = recipe_for("mnist_inference");
  tfrecord.recorder = &settings_record();
  tfrecord.data_options.format = DataFormat::kTfRecord;
  tfrecord.data_options.image_feature = "pixels";
  tfrecord.data_options.feature_scale = parse_feature_scale("0.5");
  tfrecord.eval_moving_average = true;
  out.push_back(tfrecord);
  return out;
}

TEST(RecordedSettings, AreByteForByteWhatTheHandWrittenFunctionRecorded) {
  const TempDir dir;
  for (const TrainConfig& c : configs(dir)) {
    ASSERT_EQ(c.recorder, &settings_record()) << c.model.name;
    // What came after it: the global batch (null while unknown, as in these configs; a
    // checkpoint without it is not compared on it, train/resume_check.cc).
    nlohmann::json recorded = train_config_json(c);
    EXPECT_TRUE(recorded.at("global_batch").is_null()) << c.model.name;
    recorded.erase("global_batch");
    EXPECT_EQ(recorded.dump(), hand_written_config_json(c).dump()) << c.model.name;
  }
}

TEST(RecordedSettings, EachRecordedKeyHasOneRowAndTheRowsReadTheEffectiveValues) {
  std::set<std::string_view> keys;
  for (const FlagSpec& flag : flag_table()) {
    if (flag.recorded.value == nullptr) continue;
    EXPECT_FALSE(flag.recorded.key.empty()) << flag.name;
    EXPECT_TRUE(keys.insert(flag.recorded.key).second) << "twice: " << flag.recorded.key;
  }
  // The recipe's values, not the flags' (0 when not given): lenet's learning rate and optimizer.
  const nlohmann::json lenet = train_config_json(plan_of({"--model", "lenet"}).config);
  const TrainConfig recipe = recipe_for("lenet");
  EXPECT_EQ(lenet["learning_rate"], recipe.learning_rate);
  EXPECT_EQ(lenet["optimizer"], recipe.optimizer.name);
}

TEST(RecordedSettings, AConfigBuiltByHandWithoutTheRecorderRecordsNothing) {
  TrainConfig c = recipe_for("softmax");
  EXPECT_EQ(train_config_json(c), nlohmann::json::object());
  c.recorder = &settings_record();
  EXPECT_EQ(train_config_json(c)["model"], "softmax");
}

}  // namespace
}  // namespace dtrain::testing
