// Softmax cross-entropy, one row at a time: shift by the row max, exponentiate, normalise.
#include "nn/softmax_cross_entropy.h"

#include <cmath>

namespace dtrain {

float softmax_cross_entropy(const float* logits, const int32_t* labels, int n, int classes,
                            float* dlogits, const float* weights) {
  double total = 0.0;
  const float inv_n = 1.0f / static_cast<float>(n);
  for (int r = 0; r < n; ++r) {
    const float* row = logits + static_cast<size_t>(r) * classes;
    float max = row[0];
    for (int c = 1; c < classes; ++c) max = row[c] > max ? row[c] : max;
    float sum = 0.0f;
    for (int c = 0; c < classes; ++c) sum += std::exp(row[c] - max);
    const float log_sum = std::log(sum);
    // -log softmax[label] = log Σ exp(x - max) - (x_label - max). A weight of 1 multiplies
    // exactly: unweighted, the bits are those of the plain mean.
    const float weight = weights != nullptr ? weights[r] : 1.0f;
    total += static_cast<double>(weight) * (log_sum - (row[labels[r]] - max));
    if (dlogits == nullptr) continue;
    const float scale = inv_n * weight;
    float* grad = dlogits + static_cast<size_t>(r) * classes;
    for (int c = 0; c < classes; ++c) grad[c] = std::exp(row[c] - max - log_sum) * scale;
    grad[labels[r]] -= scale;
  }
  return n > 0 ? static_cast<float>(total / n) : 0.0f;
}

void argmax_rows(const float* logits, int n, int classes, int32_t* predictions) {
  for (int r = 0; r < n; ++r) {
    const float* row = logits + static_cast<size_t>(r) * classes;
    int best = 0;
    for (int c = 1; c < classes; ++c) best = row[c] > row[best] ? c : best;
    predictions[r] = best;
  }
}

}  // namespace dtrain
