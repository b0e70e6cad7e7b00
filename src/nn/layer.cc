#include "nn/layer.h"

#include "tensor/ops.h"
#include "tensor/thread_team.h"

namespace dtrain {

float Layer::start_weight_gradient(const ParamSet& params, GradSet& grads, size_t index) const {
  const float l2 = params.spec(index).l2;
  if (l2 == 0.0f) return 0.0f;
  std::span<const float> w = params.values(index);
  std::span<float> g = grads.values(index);
  parallel_rows(params.rows(index), w.size() / params.rows(index),
                [&](int, size_t begin, size_t end) {
                  const float* __restrict src = w.data();
                  float* __restrict dst = g.data();
                  for (size_t i = begin; i < end; ++i) dst[i] = l2 * src[i];
                });
  return 1.0f;
}

void Layer::backward_sgd_step(ParamSet& params, GradSet& grads, const LayerIo& io,
                              const float* dout, float* din, float lr) const {
  backward(params, grads, io, dout, din);
  for (size_t p = first_param_; p < first_param_ + num_params_; ++p) {
    std::span<float> v = params.values(p);
    std::span<const float> g = grads.values(p);
    const float rate = params.spec(p).trainable ? lr : 1.0f;  // a statistic's delta is assigned
    parallel_rows(params.rows(p), v.size() / params.rows(p), [&](int, size_t begin, size_t end) {
      axpy(-rate, g.subspan(begin, end - begin), v.subspan(begin, end - begin));
    });
  }
}

}  // namespace dtrain
