#include "bench/conv_bench.h"

#include <fmt/format.h>

#include <memory>
#include <random>

#include "base/error.h"
#include "bench/window_timing.h"
#include "nn/conv2d.h"
#include "nn/conv_kernels.h"
#include "tensor/aligned.h"
#include "tensor/blas.h"

namespace dtrain::bench {
namespace {

// A layer's buffers for one batch, filled with small values so that nothing overflows.
struct ConvBuffers {
  ConvBuffers(const ConvShape& s, int batch)
      : w(s.weight_floats()),
        bias(s.out_channels),
        in(batch * s.image_floats()),
        out(batch * s.out_image_floats()),
        dout(out.size()),
        dw(w.size()),
        db(bias.size()),
        din(in.size()) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> value(-0.01f, 0.01f);
    for (FloatBuffer* x : {&w, &bias, &in, &dout})
      for (float& v : *x) v = value(rng);
  }
  // Cache-line aligned, as a model's tensors are (see Operands in gemm_bench.cc).
  FloatBuffer w, bias, in, out, dout, dw, db, din;
};

enum class Pass { kForward, kBackward };

// Seconds of one forward or backward pass, over one window.
double seconds_per_pass(const ConvKernels& conv, ConvBuffers& b, int batch, bool input_gradient,
                        Pass which, Precision precision, double window) {
  const PrecisionScope in_precision(precision);
  const auto pass = [&] {
    if (which == Pass::kForward) {
      conv.forward(b.w.data(), b.bias.data(), b.in.data(), batch, b.out.data());
    } else {
      conv.backward(b.w.data(), b.in.data(), b.dout.data(), batch, 0.0f, b.dw.data(), b.db.data(),
                    input_gradient ? b.din.data() : nullptr);
    }
  };
  return seconds_per_run(pass, window);
}

// An implementation's times, per precision and pass.
struct Candidate {
  ConvImplementation implementation;
  std::unique_ptr<ConvKernels> kernels;
  std::vector<double> times[2][2];  // [bf16][backward]
};

// The fastest candidate's median for one precision and pass, and its name.
std::pair<double, std::string> fastest(const std::vector<Candidate>& candidates, int bf16,
                                       int backward) {
  std::pair<double, std::string> best{0.0, ""};
  for (const Candidate& c : candidates) {
    const double t = median(c.times[bf16][backward]);
    if (best.second.empty() || t < best.first)
      best = {t, std::string(conv_implementation_name(c.implementation))};
  }
  return best;
}

// "onednn", or "onednn / im2col" where the fastest forward and backward differ.
std::string implementations(const std::string& forward, const std::string& backward) {
  return forward == backward ? forward : forward + " / " + backward;
}

}  // namespace

std::vector<ConvTiming> time_convolutions(const Model& model, int batch, double seconds_per_rep,
                                          int reps, bool bf16) {
  std::vector<ConvTiming> timings;
  const auto& layers = model.layers();
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto* conv = dynamic_cast<const Conv2D*>(layers[i].get());
    if (conv == nullptr) continue;
    const ConvShape& s = conv->conv_shape();
    std::vector<Candidate> candidates;
    for (const ConvImplementation impl :
         {ConvImplementation::kOneDnn, ConvImplementation::kDirect, ConvImplementation::kIm2col}) {
      try {
        candidates.push_back({impl, make_conv_kernels(s, impl, conv->weight_name()), {}});
      } catch (const Error&) {
        // This implementation does not run the shape at all: not a candidate.
      }
    }
    ConvBuffers buffers(s, batch);
    const bool input_gradient = i > 0;  // the model computes none for its first layer
    for (int r = 0; r < reps; ++r) {
      for (Candidate& c : candidates) {
        for (const int in_bf16 : {0, 1}) {
          if (in_bf16 && !bf16) continue;
          const Precision precision = in_bf16 ? Precision::kBf16 : Precision::kFp32;
          for (const Pass pass : {Pass::kForward, Pass::kBackward}) {
            c.times[in_bf16][pass == Pass::kBackward].push_back(seconds_per_pass(
                *c.kernels, buffers, batch, input_gradient, pass, precision, seconds_per_rep));
          }
        }
      }
    }
    ConvTiming t;
    t.layer = conv->weight_name();
    t.shape =
        fmt::format("{}x{}x{}->{}x{}x{} k{}x{}", s.height, s.width, s.in_channels, s.out_height,
                    s.out_width, s.out_channels, s.kernel_height, s.kernel_width);
    for (const int in_bf16 : {0, 1}) {
      if (in_bf16 && !bf16) continue;
      const auto [forward_s, forward] = fastest(candidates, in_bf16, 0);
      const auto [backward_s, backward] = fastest(candidates, in_bf16, 1);
      (in_bf16 ? t.bf16_seconds : t.fp32_seconds) = forward_s + backward_s;
      (in_bf16 ? t.bf16_implementation : t.fp32_implementation) =
          implementations(forward, backward);
    }
    timings.push_back(std::move(t));
  }
  return timings;
}

}  // namespace dtrain::bench
