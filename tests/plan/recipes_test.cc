// The recipes: the built-in models' come from their JSON, a model file may name its own defaults
// (Keras' for the rest), each key applied through its flag's row, and the file is read once for
// everything a run does with it.
#include "plan/recipes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "base/error.h"
#include "nn/model_zoo.h"
#include "plan/recorded_settings.h"
#include "plan/run_plan.h"
#include "support/plan_args.h"
#include "support/temp_dir.h"
#include "train/training_state.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using testing::write_bytes;

// A 784→10 softmax model as Keras writes it, with `top_level` added beside class_name.
std::string tiny_model_json(const std::string& top_level = "") {
  return R"({"class_name": "Sequential", )" + top_level +
         R"("config": {"name": "tiny", "layers": [
             {"class_name": "InputLayer", "config": {"batch_shape": [null, 784]}},
             {"class_name": "Dense", "config": {"units": 10, "activation": "softmax"}}]}})";
}

struct Expected {
  const char* model;
  const char* optimizer;
  float learning_rate;
  float lr_decay_rate;
  float moving_average_decay;
  double epochs;
};

TEST(Recipes, EachBuiltInModelTrainsByItsTutorialsRecipe) {
  for (const Expected& e : {Expected{"softmax", "sgd", 0.5f, 1.0f, 0.999f, 5},
                            Expected{"mlp", "adam", 0.002f, 1.0f, 0.999f, 10},
                            Expected{"mnist_inference", "sgd", 0.8f, 0.99f, 0.99f, 20},
                            Expected{"lenet", "adam", 0.001f, 1.0f, 0.999f, 4}}) {
    const TrainConfig c = recipe_for(e.model);
    EXPECT_EQ(c.model.name, e.model);
    EXPECT_EQ(c.optimizer.name, e.optimizer) << e.model;
    EXPECT_EQ(c.learning_rate, e.learning_rate) << e.model;
    EXPECT_EQ(c.lr_decay_rate, e.lr_decay_rate) << e.model;
    EXPECT_EQ(c.moving_average_decay, e.moving_average_decay) << e.model;
    EXPECT_TRUE(c.eval_moving_average) << e.model;
    EXPECT_EQ(c.epochs, e.epochs) << e.model;
  }
}

TEST(Recipes, AModelFileWithoutDefaultsGetsKerasAdamAndTheRawWeights) {
  TempDir dir;
  write_bytes(dir / "tiny.json", tiny_model_json());
  const TrainConfig c = recipe_for((dir / "tiny.json").string());
  EXPECT_EQ(c.optimizer.name, "adam");
  EXPECT_EQ(c.learning_rate, 0.001f);
  EXPECT_EQ(c.lr_decay_rate, 1.0f);
  EXPECT_EQ(c.moving_average_decay, 0.0f);
  EXPECT_FALSE(c.eval_moving_average);
  EXPECT_EQ(c.epochs, 10);
}

TEST(Recipes, AModelFileMayNameItsOwnDefaultsAndKerasFillsTheRest) {
  TempDir dir;
  write_bytes(dir / "tiny.json",
              tiny_model_json(R"("dtrain": {"defaults": {"optimizer": "momentum", )"
                              R"("moving_average_decay": 0.9, "epochs": 3}}, )"));
  const TrainConfig c = recipe_for((dir / "tiny.json").string());
  EXPECT_EQ(c.optimizer.name, "momentum");
  EXPECT_EQ(c.moving_average_decay, 0.9f);
  EXPECT_TRUE(c.eval_moving_average);
  EXPECT_EQ(c.epochs, 3);
  EXPECT_EQ(c.learning_rate, 0.001f);
}

TEST(Recipes, AnUnknownOptimizerInTheFileIsBlamedOnTheFileNotOnAFlag) {
  TempDir dir;
  const std::string path = (dir / "tiny.json").string();
  write_bytes(path, tiny_model_json(R"("dtrain": {"defaults": {"optimizer": "lion"}}, )"));
  try {
    recipe_for(path);
    FAIL() << "accepted optimizer lion";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path + ": dtrain defaults optimizer lion: unknown"));
  }
}

// The plan takes a recipe's value where the flag is not given, and the flag's where it is.
TEST(Recipes, ARecipeDefaultsItsFlagsRowAndAGivenFlagWins) {
  TempDir dir;
  const std::string path = (dir / "tiny.json").string();
  write_bytes(path, tiny_model_json(R"("dtrain": {"defaults": {"learning_rate": 0.25, )"
                                    R"("epochs": 2}}, )"));
  const RunPlan recipe = testing::plan_of({"--model", path});
  EXPECT_EQ(recipe.config.learning_rate, 0.25f);
  EXPECT_EQ(recipe.config.epochs, 2);
  EXPECT_EQ(recipe.config.optimizer.name, "adam");  // Keras' where the file says nothing
  const RunPlan given = testing::plan_of({"--model", path, "--learning_rate", "0.5"});
  EXPECT_EQ(given.config.learning_rate, 0.5f);
  EXPECT_EQ(given.config.epochs, 2);
}

// The keys a recipe may name are the flag table's recipe rows; any other, or a value its flag
// could not take, is refused naming the file and the key.
TEST(Recipes, AKeyThatNamesNoRecipeFlagOrAMistypedValueIsRefusedNamingTheFileAndTheKey) {
  TempDir dir;
  const std::string path = (dir / "d.json").string();
  const auto refusal = [&](const std::string& defaults) {
    write_bytes(path, tiny_model_json(R"("dtrain": {"defaults": )" + defaults + "}, "));
    try {
      testing::plan_of({"--model", path});
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refusal(R"({"batch_size": 32})"),
            path +
                ": dtrain defaults batch_size is not supported (only learning_rate, "
                "lr_decay_rate, optimizer, moving_average_decay, epochs)");
  EXPECT_EQ(refusal(R"({"no_such_flag": 1})"),
            path +
                ": dtrain defaults no_such_flag is not supported (only learning_rate, "
                "lr_decay_rate, optimizer, moving_average_decay, epochs)");
  EXPECT_EQ(refusal(R"({"learning_rate": "fast"})"),
            path + ": dtrain defaults learning_rate \"fast\" is not a finite number");
  EXPECT_EQ(refusal(R"({"epochs": 1e300})"),
            path + ": dtrain defaults epochs 1e+300 is not a finite number");
  EXPECT_EQ(refusal(R"({"optimizer": 3})"), path + ": dtrain defaults optimizer 3 is not a name");
  // A value the flag's own check refuses is the file's fault, not the flag's.
  EXPECT_EQ(refusal(R"({"learning_rate": -1})"),
            path + ": dtrain defaults learning_rate -1: must be a positive number");
}

// A ps task validates the model, builds it for its shards, restores a checkpoint into it, and
// writes the spec into checkpoints: with the file gone after recipe_for, each still works.
TEST(Recipes, TheModelFileIsReadOnceForEverythingARunDoesWithIt) {
  TempDir dir;
  const std::filesystem::path path = dir / "tiny.json";
  write_bytes(path, tiny_model_json());
  const TrainConfig c = recipe_for(path.string());
  std::filesystem::remove(path);

  EXPECT_NO_THROW(validate_train_config(c));
  EXPECT_EQ(recorded_settings(c)["model_spec"]["config"]["name"], "tiny");
  const TrainingState state(c);
  EXPECT_EQ(state.params().num_values(), int64_t{784 * 10 + 10});
  EXPECT_EQ(make_model(c.model)->num_classes(), 10);
}

}  // namespace
}  // namespace dtrain
