// Per-example predictions of a model (`dtrain predict`): the class, the class probabilities
// (softmax of the logits) and optionally the logits of every example, as CSV.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "data/dataset.h"
#include "nn/model.h"
#include "nn/param_set.h"

namespace dtrain {

struct PredictionSummary {
  int64_t records = 0;
  double accuracy = 0;  // of the predicted classes against the data's labels; 0 without labels
};

// Throws UsageError naming source (the input files) and both shapes when data's examples are not
// the model's input size, or naming the row of the first label the model does not take.
void check_input_fits(const Model& model, const Dataset& data, const std::string& source);

// Writes a header "index,label,class,prob_0,...,prob_{K-1}" (then "logit_0,..." with
// with_logits; without "label" for data without labels) and one row per example of data, in
// order, to csv. Values are printed to float's
// full precision (9 significant digits). The class is the first largest logit, as dtrain eval
// counts it. A binary head's header is "index,label,class,probability" (then "logit"): the
// sigmoid of its logit, and class 1 where that is at least 0.5.
// REQUIRES: check_input_fits(model, data, ...) passes.
PredictionSummary write_predictions(const Model& model, const ParamSet& params, const Dataset& data,
                                    bool with_logits, std::ostream& csv);

}  // namespace dtrain
