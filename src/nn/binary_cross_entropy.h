// Sigmoid + binary cross-entropy fused, the loss of a binary head (Keras' Dense(1,
// activation="sigmoid") with binary_crossentropy): the model ends at one logit per example, and
// the pair's gradient is simply sigmoid(logit) - label.
#pragma once

#include <cstdint>

namespace dtrain {

// logits is (N), labels is (N) with values 0 or 1. Returns the mean over the batch of
// -[y·log p + (1-y)·log(1-p)], p = sigmoid(logit), computed as TensorFlow's
// sigmoid_cross_entropy_with_logits does, max(x, 0) - x·y + log(1 + exp(-|x|)), which stays
// finite for any logit. When dlogits is not null, writes (p - y) / N into it; it may alias logits.
// With weights (N), example r counts weights[r] times, as in softmax_cross_entropy.
float binary_cross_entropy(const float* logits, const int32_t* labels, int n, float* dlogits,
                           const float* weights = nullptr);

// The predicted class of each example, 1 where p >= 0.5 (the logit is at least 0), into
// predictions (N).
void threshold_logits(const float* logits, int n, int32_t* predictions);

// sigmoid(logit) in double, for printed probabilities.
double sigmoid_probability(float logit);

}  // namespace dtrain
