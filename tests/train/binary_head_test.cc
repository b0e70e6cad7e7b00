// A binary head (Dense(1, activation="sigmoid") with binary_crossentropy): its labels are 0 and 1,
// a label beyond is refused naming its row, and predictions are the sigmoid's probability with
// the class at 0.5.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "base/error.h"
#include "nn/model.h"
#include "nn/model_spec.h"
#include "train/predict.h"
#include "train/training_input.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Model> binary_model() {
  return build_model({.name = "binary",
                      .input_shape = {2},
                      .layers = {LayerSpec{.kind = LayerKind::kDense,
                                           .name = "out",
                                           .units = 1,
                                           .activation = ActivationKind::kSigmoid}}});
}

Dataset two_features(std::vector<int32_t> labels) {
  Dataset d;
  d.size = static_cast<int64_t>(labels.size());
  d.example_size = 2;
  for (size_t i = 0; i < labels.size(); ++i) {
    d.images.push_back(static_cast<float>(i));
    d.images.push_back(-1.0f);
  }
  d.num_classes = *std::max_element(labels.begin(), labels.end()) + 1;
  d.labels = std::move(labels);
  return d;
}

TEST(BinaryHead, ALabelBeyondOneIsRefusedNamingItsRow) {
  const std::unique_ptr<Model> model = binary_model();
  TrainingInput fine(two_features({0, 1, 1}), two_features({1, 0}));
  EXPECT_NO_THROW(fine.check_fits(*model));

  TrainingInput bad(two_features({0, 1, 1}), two_features({1, 0, 2, 3}));
  try {
    bad.check_fits(*model);
    FAIL() << "label 2 was accepted by a binary head";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr("row 2 of the test data"));
    EXPECT_THAT(e.what(), HasSubstr("has label 2, but model binary takes labels 0 and 1"));
    EXPECT_THAT(e.what(), HasSubstr("Dense(1, activation=\"sigmoid\")"));
  }
  try {
    check_input_fits(*model, two_features({1, 5}), "in.csv");
    FAIL() << "label 5 was accepted by a binary head";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("in.csv: row 1 has label 5"));
  }
}

TEST(BinaryHead, PredictionsAreTheSigmoidsProbabilityAndClassOneFromOneHalf) {
  const std::unique_ptr<Model> model = binary_model();
  ParamSet params(model->param_specs());
  // logit = x0 - 1: rows x0 = 0, 1, 2 give logits -1, 0, 1.
  params.values(0)[0] = 1.0f;
  params.values(1)[0] = 0.0f;
  params.values(0)[1] = 1.0f;
  std::ostringstream csv;
  const PredictionSummary summary =
      write_predictions(*model, params, two_features({0, 0, 1}), /*with_logits=*/true, csv);
  EXPECT_EQ(csv.str(),
            "index,label,class,probability,logit\n"
            "0,0,0,0.268941421,-1\n"
            "1,0,1,0.5,0\n"
            "2,1,1,0.731058579,1\n");
  EXPECT_DOUBLE_EQ(summary.accuracy, 2.0 / 3.0);
}

// Validation judges a binary head by its own loss and threshold, not a softmax over one logit
// (whose cross-entropy is 0 and whose argmax is always class 0).
TEST(BinaryHead, EvaluationGivesTheMeanBinaryCrossEntropyAndTheThresholdsAccuracy) {
  const std::unique_ptr<Model> model = binary_model();
  ParamSet params(model->param_specs());
  params.values(0)[0] = 1.0f;  // logit = x0 - 1, as above
  params.values(0)[1] = 1.0f;
  const Dataset d = two_features({0, 0, 1});
  Workspace workspace(*model, 2, WorkspaceUse::kInference);
  ModelRunner runner(*model, workspace);
  const ModelRunner::Evaluation e = runner.evaluate(params, d.images.data(), d.labels.data(), 3);
  EXPECT_DOUBLE_EQ(e.accuracy, 2.0 / 3.0);
  // -log(1 - σ(-1)), -log(1 - σ(0)), -log σ(1): log(1 + e^-1) + log 2 + log(1 + e^-1), over 3.
  const double expected = (2 * std::log1p(std::exp(-1.0)) + std::log(2.0)) / 3;
  EXPECT_NEAR(e.loss, expected, 1e-6);
}

}  // namespace
}  // namespace dtrain
