// Fused softmax + cross-entropy, the loss of every model here. Fused because the gradient of the
// pair is simply softmax(logits) - onehot(label), and computing it from the max-shifted logits
// keeps it finite for any input (TensorFlow's softmax_cross_entropy_with_logits does the same).
#pragma once

#include <cstdint>

namespace dtrain {

// logits is (N, C), labels is (N) with values in [0, C). Returns the mean over the batch of
// -log softmax(logits)[label]. When dlogits is not null, writes dLoss/dlogits (N, C) for that mean,
// i.e. (softmax - onehot) / N. dlogits may alias logits. With weights (N), example r's loss and
// gradient count weights[r] times: the sum of the weighted losses over N, as Keras reduces a loss
// with sample weights ("sum_over_batch_size"); null weights are all 1.
float softmax_cross_entropy(const float* logits, const int32_t* labels, int n, int classes,
                            float* dlogits, const float* weights = nullptr);

// Index of the largest logit of each row (the predicted class), into predictions (N).
void argmax_rows(const float* logits, int n, int classes, int32_t* predictions);

}  // namespace dtrain
