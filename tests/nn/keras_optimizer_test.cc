// The optimizer a model file was compiled with, as Keras 2, Keras 3 and TensorFlow.js write it:
// read whole (the framework's defaults for what the file leaves out), or refused by name. The
// fixtures are hand-written in each tool's layout (see nn/keras_optimizer.h for the keys).
#include "nn/keras_optimizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "nn/keras_json.h"
#include "nn/keras_json_writer.h"

namespace dtrain {
namespace {

using nlohmann::json;

json sequential() {
  return json::parse(R"({"class_name": "Sequential", "config": {"name": "m", "layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4], "name": "in"}},
    {"class_name": "Dense", "config": {"name": "out", "units": 3, "activation": "softmax"}}]}})");
}

// Keras 2 (tf.keras 2.x model.to_json() after compile, the h5 "training_config" attribute).
json keras2_rmsprop() {
  json doc = sequential();
  doc["training_config"] = json::parse(R"({"loss": "sparse_categorical_crossentropy",
    "metrics": ["accuracy"], "optimizer_config": {"class_name": "RMSprop", "config": {
      "name": "RMSprop", "learning_rate": 0.01, "decay": 0.0, "rho": 0.8, "momentum": 0.0,
      "epsilon": 1e-07, "centered": false}}})");
  return doc;
}

TEST(KerasOptimizer, Keras2TrainingConfigIsReadWithItsSettings) {
  const ModelSpec spec = read_keras_json(keras2_rmsprop(), "m.json");
  ASSERT_TRUE(spec.optimizer.has_value());
  EXPECT_EQ(spec.optimizer->origin, "training_config optimizer_config RMSprop");
  const json& s = spec.optimizer->settings;
  EXPECT_EQ(s["optimizer"], "rmsprop");
  EXPECT_FLOAT_EQ(s["learning_rate"].get<float>(), 0.01f);
  EXPECT_FLOAT_EQ(s["rho"].get<float>(), 0.8f);
  EXPECT_EQ(s["centered"], false);
}

// Keras 3 (config.json of a .keras file): the optimizer object with every base keyword.
TEST(KerasOptimizer, Keras3CompileConfigIsReadAndKerasDefaultsFillTheRest) {
  json doc = sequential();
  doc["compile_config"] = json::parse(R"({"optimizer": {"module": "keras.optimizers",
    "class_name": "AdamW", "config": {"name": "adamw", "learning_rate": 0.002,
    "weight_decay": 0.01, "clipnorm": null, "global_clipnorm": null, "clipvalue": 0.5,
    "use_ema": false, "ema_momentum": 0.99, "ema_overwrite_frequency": null,
    "loss_scale_factor": null, "gradient_accumulation_steps": null, "beta_1": 0.85,
    "amsgrad": false}, "registered_name": null}, "loss": "sparse_categorical_crossentropy"})");
  const ModelSpec spec = read_keras_json(doc, "m.json");
  ASSERT_TRUE(spec.optimizer.has_value());
  const json& s = spec.optimizer->settings;
  EXPECT_EQ(s["optimizer"], "adamw");
  EXPECT_FLOAT_EQ(s["weight_decay"].get<float>(), 0.01f);
  EXPECT_FLOAT_EQ(s["clipvalue"].get<float>(), 0.5f);
  EXPECT_FLOAT_EQ(s["beta_1"].get<float>(), 0.85f);
  EXPECT_FLOAT_EQ(s["beta_2"].get<float>(), 0.999f);  // adamw.py's default
  EXPECT_FLOAT_EQ(s["epsilon"].get<float>(), 1e-7f);  // Keras', not TensorFlow 1's 1e-8
  EXPECT_FALSE(s.contains("clipnorm"));
  // Written back in Keras 3's form, it reads as the same optimizer.
  EXPECT_EQ(read_keras_json(to_keras_json(spec).dump(), "again"), spec);
}

// TensorFlow.js model.save: camelCase keys, RMSProp's rho called decay, at the top level.
TEST(KerasOptimizer, TensorFlowJsTrainingConfigIsReadInItsOwnKeys) {
  json doc = {{"modelTopology", sequential()}, {"weightsManifest", json::array()}};
  doc["trainingConfig"] = json::parse(R"({"loss": "categoricalCrossentropy",
    "optimizer_config": {"class_name": "RMSProp", "config": {"learningRate": 0.005,
    "decay": 0.7, "momentum": 0.2, "epsilon": 1e-7, "centered": true}}})");
  const ModelSpec spec = read_keras_json(doc, "model.json");
  ASSERT_TRUE(spec.optimizer.has_value());
  const json& s = spec.optimizer->settings;
  EXPECT_EQ(s["optimizer"], "rmsprop");
  EXPECT_FLOAT_EQ(s["rho"].get<float>(), 0.7f);
  EXPECT_FLOAT_EQ(s["momentum"].get<float>(), 0.2f);
  EXPECT_FLOAT_EQ(s["learning_rate"].get<float>(), 0.005f);
  EXPECT_EQ(s["centered"], true);
  // tensorflowjs_converter keeps Keras' training_config inside modelTopology.
  json converted = {{"modelTopology", keras2_rmsprop()}};
  EXPECT_EQ(read_keras_json(converted, "c.json").optimizer->settings["optimizer"], "rmsprop");
}

std::string refusal(const json& doc) {
  try {
    read_keras_json(doc, "m.json");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(KerasOptimizer, AnOptimizerOrSettingDtrainLacksIsRefusedByName) {
  json doc = sequential();
  doc["training_config"] = {{"optimizer_config", {{"class_name", "Adadelta"}, {"config", {}}}}};
  EXPECT_THAT(refusal(doc), ::testing::HasSubstr("m.json: training_config optimizer_config "
                                                 "Adadelta is not implemented (dtrain has SGD"));
  doc["training_config"] = {
      {"optimizer_config", {{"class_name", "Adam"}, {"config", {{"amsgrad", true}}}}}};
  EXPECT_THAT(refusal(doc), ::testing::HasSubstr("Adam amsgrad true is not implemented"));
  doc["training_config"] = {
      {"optimizer_config", {{"class_name", "SGD"}, {"config", {{"decay", 0.01}}}}}};
  EXPECT_THAT(refusal(doc), ::testing::HasSubstr("SGD decay 0.01 is not implemented"));
  doc.erase("training_config");
  doc["compile_config"] = {{"optimizer", "lion"}};
  EXPECT_THAT(refusal(doc), ::testing::HasSubstr("compile_config optimizer lion is not"));
}

}  // namespace
}  // namespace dtrain
