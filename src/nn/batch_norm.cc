// BatchNormalization forward/backward. M = rows (batch times every position of a channel), C =
// channels; in, out, dout and din are (M, C) row-major, gamma, beta and the statistics (C).
//
// Backward follows from out = gamma·xhat + beta, xhat = (in - mean)·inv_std, with mean and var
// functions of the whole batch: dbeta = Σ dout, dgamma = Σ dout·xhat and
// din = gamma·inv_std·(dout - dbeta/M - xhat·dgamma/M), each sum over the rows of a channel.
#include "nn/batch_norm.h"

#include <fmt/format.h>

#include <cmath>

#include "base/error.h"

namespace dtrain {
namespace {

// Where each per-channel array lives in the layer's scratch, in units of C floats.
enum ScratchSlot { kMean, kVariance, kInvStd, kSumDout, kSumDoutXhat, kBlock, kScratchSlots };

// Rows summed in float before their block's sum joins the channel's total: a sum over 10^5 rows
// (a batch of 128 28x28 feature maps) then rounds like one over a few hundred.
constexpr int64_t kBlockRows = 256;

// sum[c] = Σ_r term(r, c) for every channel, in blocks of kBlockRows rows; block is C floats of
// scratch.
template <typename Term>
void channel_sums(int64_t rows, int64_t c, float* block, float* sum, const Term& term) {
  std::fill_n(sum, c, 0.0f);
  for (int64_t begin = 0; begin < rows; begin += kBlockRows) {
    const int64_t end = std::min(rows, begin + kBlockRows);
    std::fill_n(block, c, 0.0f);
    for (int64_t r = begin; r < end; ++r)
      for (int64_t k = 0; k < c; ++k) block[k] += term(r, k);
    for (int64_t k = 0; k < c; ++k) sum[k] += block[k];
  }
}

// A moving variance at least this much its initial value, averaged over the channels, is named
// after training. Half: the layer's outputs then evaluate at most 1/sqrt(2) of the scale training
// gave them. Measured on a CNN's first layer at momentum 0.99 (docs/strategies.md): a share of
// 0.89 (275 updates) scored 0.7698 where the same weights on debiased statistics score 0.9736; a
// share of 0.39 (550 updates) 0.9779 where they score 0.9795.
constexpr double kStartShareWarned = 0.5;

}  // namespace

BatchNorm::BatchNorm(BatchNormOptions options) : options_(std::move(options)) {
  if (options_.shape.empty() || num_elements(options_.shape) <= 0)
    throw Error(fmt::format("batch normalization of shape {}", shape_string(options_.shape)));
  if (!(options_.momentum >= 0.0f && options_.momentum <= 1.0f))
    throw Error(fmt::format("momentum {} is not in [0, 1]", options_.momentum));
  if (!(options_.epsilon > 0.0f) || !std::isfinite(options_.epsilon))
    throw Error(fmt::format("epsilon {} is not above 0", options_.epsilon));
}

std::string BatchNorm::describe() const {
  return fmt::format("batch_norm {} ({})", shape_string(options_.shape), options_.moving_mean_name);
}

std::vector<ParamSpec> BatchNorm::param_specs() const {
  const int64_t c = channels();
  auto vector = [c](const std::string& name, const InitSpec& init, bool trainable) {
    return ParamSpec{.name = name,
                     .shape = {c},
                     .init = init,
                     .fan_in = c,
                     .fan_out = c,
                     .trainable = trainable};
  };
  std::vector<ParamSpec> specs;
  if (has_gamma()) specs.push_back(vector(options_.gamma_name, options_.gamma_init, true));
  if (has_beta()) specs.push_back(vector(options_.beta_name, options_.beta_init, true));
  specs.push_back(vector(options_.moving_mean_name, options_.moving_mean_init, false));
  specs.push_back(vector(options_.moving_variance_name, options_.moving_variance_init, false));
  return specs;
}

size_t BatchNorm::scratch_floats(int /*batch*/) const {
  return static_cast<size_t>(kScratchSlots * channels());
}

size_t BatchNorm::moving_mean_index() const {
  return first_param_ + (has_gamma() ? 1 : 0) + (has_beta() ? 1 : 0);
}

std::string BatchNorm::statistics_warning(const ParamSet& params, int64_t updates) const {
  const InitSpec& init = options_.moving_variance_init;
  const float start = init.kind == InitKind::kOnes       ? 1.0f
                      : init.kind == InitKind::kConstant ? init.value
                                                         : 0.0f;
  if (!(start > 0.0f) || updates < 0) return "";
  const double remains = std::pow(static_cast<double>(options_.momentum), updates);
  const std::span<const float> variance = params.values(moving_variance_index());
  double share = 0;
  for (const float v : variance) share += v > 0 ? std::min(1.0, remains * start / v) : 1.0;
  share /= static_cast<double>(variance.size());
  if (share < kStartShareWarned) return "";
  return fmt::format(
      "{}: after {} updates at momentum {} it still holds {}^{} = {:.2g} of its initial {}, on "
      "average {:.0f}% of its value, so evaluation normalises by a variance training has not "
      "reached and its accuracy understates the weights; train more steps (W workers of "
      "--batch_size B take N/(W·B) steps an epoch) or give the layer a lower momentum",
      options_.moving_variance_name, updates, options_.momentum, options_.momentum, updates,
      remains, start, 100 * share);
}

void BatchNorm::forward(const ParamSet& params, const LayerIo& io) const {
  const int64_t m = rows(io.batch), c = channels();
  float* mean = io.scratch + kMean * c;
  float* variance = io.scratch + kVariance * c;
  float* inv_std = io.scratch + kInvStd * c;
  const float* in = io.in;
  if (io.training) {
    channel_sums(m, c, io.scratch + kBlock * c, mean,
                 [&](int64_t r, int64_t k) { return in[r * c + k]; });
    for (int64_t k = 0; k < c; ++k) mean[k] /= static_cast<float>(m);
    // Two passes, not E[x²] - E[x]²: the difference of two large sums cancels catastrophically.
    channel_sums(m, c, io.scratch + kBlock * c, variance, [&](int64_t r, int64_t k) {
      const float d = in[r * c + k] - mean[k];
      return d * d;
    });
    for (int64_t k = 0; k < c; ++k) variance[k] /= static_cast<float>(m);
  } else {
    const std::span<const float> moving_mean = params.values(moving_mean_index());
    const std::span<const float> moving_variance = params.values(moving_variance_index());
    std::copy(moving_mean.begin(), moving_mean.end(), mean);
    std::copy(moving_variance.begin(), moving_variance.end(), variance);
  }
  for (int64_t k = 0; k < c; ++k) inv_std[k] = 1.0f / std::sqrt(variance[k] + options_.epsilon);

  // out = xhat·gamma + beta = in·scale + shift, per channel.
  float* scale = io.scratch + kSumDout * c;
  float* shift = io.scratch + kSumDoutXhat * c;
  const float* gamma = has_gamma() ? params.values(first_param_).data() : nullptr;
  const float* beta =
      has_beta() ? params.values(first_param_ + (has_gamma() ? 1 : 0)).data() : nullptr;
  for (int64_t k = 0; k < c; ++k) {
    scale[k] = inv_std[k] * (gamma != nullptr ? gamma[k] : 1.0f);
    shift[k] = (beta != nullptr ? beta[k] : 0.0f) - mean[k] * scale[k];
  }
  for (int64_t r = 0; r < m; ++r) {
    const float* __restrict x = in + r * c;
    float* __restrict y = io.out + r * c;
    for (int64_t k = 0; k < c; ++k) y[k] = x[k] * scale[k] + shift[k];
  }
}

void BatchNorm::backward(const ParamSet& params, GradSet& grads, const LayerIo& io,
                         const float* dout, float* din) const {
  const int64_t m = rows(io.batch), c = channels();
  const float* mean = io.scratch + kMean * c;
  const float* variance = io.scratch + kVariance * c;
  const float* inv_std = io.scratch + kInvStd * c;
  float* sum_dout = io.scratch + kSumDout * c;
  float* sum_dout_xhat = io.scratch + kSumDoutXhat * c;
  float* block = io.scratch + kBlock * c;
  const float* in = io.in;
  channel_sums(m, c, block, sum_dout, [&](int64_t r, int64_t k) { return dout[r * c + k]; });
  channel_sums(m, c, block, sum_dout_xhat, [&](int64_t r, int64_t k) {
    return dout[r * c + k] * (in[r * c + k] - mean[k]) * inv_std[k];
  });

  size_t p = first_param_;
  const float* gamma = has_gamma() ? params.values(p).data() : nullptr;
  if (has_gamma()) std::copy_n(sum_dout_xhat, c, grads.values(p++).data());
  if (has_beta()) std::copy_n(sum_dout, c, grads.values(p++).data());
  // The deltas that value -= delta turns into Keras' moving averages (see batch_norm.h).
  const float rate = 1.0f - options_.momentum;
  const std::span<const float> moving_mean = params.values(p);
  const std::span<const float> moving_variance = params.values(p + 1);
  std::span<float> mean_delta = grads.values(p);
  std::span<float> variance_delta = grads.values(p + 1);
  for (int64_t k = 0; k < c; ++k) {
    mean_delta[k] = rate * (moving_mean[k] - mean[k]);
    variance_delta[k] = rate * (moving_variance[k] - variance[k]);
  }

  if (din == nullptr) return;
  const float inv_m = 1.0f / static_cast<float>(m);
  for (int64_t r = 0; r < m; ++r) {
    const float* __restrict x = in + r * c;
    const float* __restrict dy = dout + r * c;
    float* __restrict dx = din + r * c;
    for (int64_t k = 0; k < c; ++k) {
      const float xhat = (x[k] - mean[k]) * inv_std[k];
      const float g = gamma != nullptr ? gamma[k] : 1.0f;
      dx[k] = g * inv_std[k] * (dy[k] - sum_dout[k] * inv_m - xhat * sum_dout_xhat[k] * inv_m);
    }
  }
}

}  // namespace dtrain
