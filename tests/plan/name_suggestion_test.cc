// "Did you mean ...?" (plan/name_suggestion.h): which known name a mistyped one finds, and that a
// name close to none finds nothing.
#include "plan/name_suggestion.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dtrain::testing {
namespace {

const std::vector<std::string> kFlags = {
    "--learning_rate", "--lr_decay_rate", "--train_steps", "--batch_size", "--train_dir",
    "--train_data",    "--epochs",        "--ps",          "--workers"};

std::string closest(std::string_view given, const std::vector<std::string>& known = kFlags) {
  return closest_name(given, known).value_or("(none)");
}

TEST(NameSuggestion, DashesForUnderscoresAndCaseFindTheFlag) {
  EXPECT_EQ(closest("--train-steps"), "--train_steps");
  EXPECT_EQ(closest("--Batch-Size"), "--batch_size");
  EXPECT_EQ(closest("-epochs"), "--epochs");
}

TEST(NameSuggestion, OtherFrameworksNamesFindOurs) {
  EXPECT_EQ(closest("--lr"), "--learning_rate");
  EXPECT_EQ(closest("--max_steps"), "--train_steps");
  EXPECT_EQ(closest("--model-dir"), "--train_dir");
  EXPECT_EQ(closest("--num_workers"), "--workers");
}

TEST(NameSuggestion, AnAliasOfAFlagThatIsNotThereFindsNothingByIt) {
  EXPECT_EQ(closest("--lr", {"--epochs", "--seed"}), "(none)");
}

TEST(NameSuggestion, TheOnlyNameBeginningSoIsFound) {
  EXPECT_EQ(closest("--learning"), "--learning_rate");
  EXPECT_EQ(closest("--work"), "--workers");
  // Three begin with "--tra": none is chosen by its beginning, and all are too far to be a typo.
  EXPECT_EQ(closest("--tra"), "(none)");
}

TEST(NameSuggestion, TyposWithinTwoEditsAreFound) {
  EXPECT_EQ(closest("--lerning_rate"), "--learning_rate");  // a letter left out
  EXPECT_EQ(closest("--batch_szie"), "--batch_size");       // two letters swapped
  EXPECT_EQ(closest("--epoch"), "--epochs");                // a short name, one edit
  EXPECT_EQ(closest("--train_stesp", {"--train_steps"}), "--train_steps");
}

TEST(NameSuggestion, NamesCloseToNoneFindNothing) {
  EXPECT_EQ(closest("--no_such_flag"), "(none)");
  EXPECT_EQ(closest("--xy"), "(none)");  // 1 edit allowed in a short name; --ps is 2 away
  EXPECT_EQ(closest("--"), "(none)");
  EXPECT_EQ(closest("--anything", {}), "(none)");
}

TEST(NameSuggestion, SubcommandsAreNamesToo) {
  const std::vector<std::string> commands = {"train", "eval", "task", "export", "predict"};
  EXPECT_EQ(closest("trian", commands), "train");
  EXPECT_EQ(closest("evaluate", commands), "eval");
  EXPECT_EQ(closest("Predict", commands), "predict");
}

}  // namespace
}  // namespace dtrain::testing
