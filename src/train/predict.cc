// Predictions in batches through ModelRunner, softmax in double.
#include "train/predict.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "nn/binary_cross_entropy.h"
#include "nn/softmax_cross_entropy.h"

namespace dtrain {
namespace {

// dtrain eval's batch (GradientComputer's evaluation workspace): the same products, so the same
// classes to the last bit.
constexpr int kBatch = 1000;

// Softmax of one row of logits, shifted by its largest value so no exp overflows.
void softmax(const float* logits, int classes, std::vector<double>& probs) {
  const float max = *std::max_element(logits, logits + classes);
  double sum = 0;
  for (int k = 0; k < classes; ++k) sum += probs[k] = std::exp(double{logits[k]} - max);
  for (int k = 0; k < classes; ++k) probs[k] /= sum;
}

}  // namespace

void check_input_fits(const Model& model, const Dataset& data, const std::string& source) {
  if (data.example_size != model.input_size()) {
    throw UsageError(fmt::format(
        "{}: {} records of {} values {}, but model {} takes {} values per example", source,
        data.size, data.example_size,
        data.notes.labelled ? std::string("with labels") : std::string("without labels"),
        model.name(), model.input_size()));
  }
  if (!data.notes.labelled) return;
  const int64_t row = first_label_outside(data, model.num_classes());
  if (data.num_classes <= model.num_classes() && row < 0) return;
  if (row >= 0) {
    throw UsageError(fmt::format("{}: row {} has label {}, but model {} takes {}", source, row,
                                 data.labels[static_cast<size_t>(row)], model.name(),
                                 model.label_rule()));
  }
  throw UsageError(fmt::format("{}: labels up to {}, but model {} takes {}", source,
                               data.num_classes - 1, model.name(), model.label_rule()));
}

namespace {

// A binary head's rows: its one logit is P(class 1) through the sigmoid.
PredictionSummary write_binary_predictions(const Model& model, const ParamSet& params,
                                           const Dataset& data, bool with_logits,
                                           std::ostream& csv) {
  const bool labelled = data.notes.labelled;
  csv << (labelled ? "index,label,class,probability" : "index,class,probability")
      << (with_logits ? ",logit\n" : "\n");
  Workspace workspace(model, kBatch, WorkspaceUse::kInference);
  ModelRunner runner(model, workspace);
  int64_t correct = 0;
  for (int64_t begin = 0; begin < data.size; begin += kBatch) {
    const int n = static_cast<int>(std::min<int64_t>(kBatch, data.size - begin));
    const float* logits = runner.logits(params, data.rows().data() + begin * data.example_size, n);
    for (int i = 0; i < n; ++i) {
      int32_t predicted = 0;
      threshold_logits(logits + i, 1, &predicted);
      const int32_t label = data.labels[static_cast<size_t>(begin + i)];
      correct += predicted == label;
      std::string line = labelled ? fmt::format("{},{},{}", begin + i, label, predicted)
                                  : fmt::format("{},{}", begin + i, predicted);
      fmt::format_to(std::back_inserter(line), ",{:.9g}", sigmoid_probability(logits[i]));
      if (with_logits) fmt::format_to(std::back_inserter(line), ",{:.9g}", logits[i]);
      csv << line << '\n';
    }
  }
  return {data.size, data.size > 0 ? static_cast<double>(correct) / data.size : 0.0};
}

}  // namespace

PredictionSummary write_predictions(const Model& model, const ParamSet& params, const Dataset& data,
                                    bool with_logits, std::ostream& csv) {
  if (model.loss() == Loss::kBinaryCrossEntropy)
    return write_binary_predictions(model, params, data, with_logits, csv);
  const int classes = model.output_width();
  const bool labelled = data.notes.labelled;
  std::string line = labelled ? "index,label,class" : "index,class";
  for (int k = 0; k < classes; ++k) line += fmt::format(",prob_{}", k);
  if (with_logits)
    for (int k = 0; k < classes; ++k) line += fmt::format(",logit_{}", k);
  csv << line << '\n';

  Workspace workspace(model, kBatch, WorkspaceUse::kInference);
  ModelRunner runner(model, workspace);
  std::vector<double> probs(static_cast<size_t>(classes));
  int64_t correct = 0;
  for (int64_t begin = 0; begin < data.size; begin += kBatch) {
    const int n = static_cast<int>(std::min<int64_t>(kBatch, data.size - begin));
    const float* logits = runner.logits(params, data.rows().data() + begin * data.example_size, n);
    for (int i = 0; i < n; ++i) {
      const float* row = logits + static_cast<int64_t>(i) * classes;
      int32_t predicted = 0;
      argmax_rows(row, 1, classes, &predicted);
      const int32_t label = data.labels[static_cast<size_t>(begin + i)];
      correct += predicted == label;
      softmax(row, classes, probs);
      line = labelled ? fmt::format("{},{},{}", begin + i, label, predicted)
                      : fmt::format("{},{}", begin + i, predicted);
      for (const double p : probs) fmt::format_to(std::back_inserter(line), ",{:.9g}", p);
      if (with_logits)
        for (int k = 0; k < classes; ++k)
          fmt::format_to(std::back_inserter(line), ",{:.9g}", row[k]);
      csv << line << '\n';
    }
  }
  return {data.size, data.size > 0 ? static_cast<double>(correct) / data.size : 0.0};
}

}  // namespace dtrain
