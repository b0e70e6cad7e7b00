// Micro-benchmarks of the kernels a training step spends its time in: the GEMMs of mnist_inference,
// lenet's two convolutions and the loss, at the tutorials' batch of 100. Counters: items_per_second
// is examples/sec; FLOPS counts 2 per multiply-add of the GEMM work (im2col and col2im excluded).
// Run with OPENBLAS_NUM_THREADS=1 (or pin it) so numbers compare across machines.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "nn/conv2d.h"
#include "nn/softmax_cross_entropy.h"
#include "tensor/blas.h"

namespace dtrain {
namespace {

constexpr int kBatch = 100;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void set_flop_counter(benchmark::State& state, double flops_per_iteration) {
  state.counters["FLOPS"] =
      benchmark::Counter(flops_per_iteration * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// Args: m, n, k, trans_a. C (m x n) = op(A) (m x k) · B (k x n).
void BM_Gemm(benchmark::State& state) {
  const int m = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1)),
            k = static_cast<int>(state.range(2));
  const Trans trans_a = state.range(3) != 0 ? Trans::kYes : Trans::kNo;
  const std::vector<float> a = random_floats(static_cast<size_t>(m) * k, 1);
  const std::vector<float> b = random_floats(static_cast<size_t>(k) * n, 2);
  std::vector<float> c(static_cast<size_t>(m) * n);
  const int lda = trans_a == Trans::kYes ? m : k;
  for (auto _ : state) {
    gemm(trans_a, Trans::kNo, m, n, k, 1.0f, a.data(), lda, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  set_flop_counter(state, 2.0 * m * n * k);
}
BENCHMARK(BM_Gemm)
    ->ArgNames({"m", "n", "k", "trans_a"})
    ->Args({kBatch, 500, 784, 0})  // hidden layer forward: (100x784)·(784x500)
    ->Args({784, 500, kBatch, 1})  // its weight gradient: inᵀ (784x100)·dout (100x500)
    ->Args({kBatch, 10, 500, 0});  // softmax layer forward: (100x500)·(500x10)

// A lenet convolution at batch 100, with its parameters, activations and scratch.
struct ConvRig {
  explicit ConvRig(const benchmark::State& state)
      : layer({.height = static_cast<int>(state.range(0)),
               .width = static_cast<int>(state.range(0)),
               .in_channels = static_cast<int>(state.range(1)),
               .out_channels = static_cast<int>(state.range(2)),
               .kernel_height = static_cast<int>(state.range(3)),
               .kernel_width = static_cast<int>(state.range(3)),
               .weight_name = "conv_w",
               .bias_name = "conv_b",
               .implementation = static_cast<ConvImplementation>(state.range(5))}),
        params(layer.param_specs()),
        grads(layer.param_specs()),
        in(random_floats(kBatch * num_elements(layer.input_shape()), 3)),
        out(kBatch * num_elements(layer.output_shape())),
        dout(random_floats(out.size(), 4)),
        din(in.size()),
        scratch(layer.scratch_floats(kBatch)) {
    layer.set_first_param(0);
    const std::vector<float> w = random_floats(params.values(0).size(), 5);
    std::copy(w.begin(), w.end(), params.values(0).begin());
  }
  LayerIo io() { return {kBatch, in.data(), out.data(), scratch.data()}; }
  // Multiply-adds of one GEMM over the batch: rows · K·K·C_in · C_out.
  double gemm_flops() const {
    return 2.0 * kBatch * num_elements(layer.output_shape()) * layer.param_specs()[0].shape[0] *
           layer.param_specs()[0].shape[1] * layer.param_specs()[0].shape[2];
  }

  Conv2D layer;
  ParamSet params;
  GradSet grads;
  std::vector<float> in, out, dout, din, scratch;
};

// Args: H (= W), C_in, C_out, kernel, for backward whether din is computed (lenet's first
// convolution needs no input gradient), and the implementation (ConvImplementation's value: 0
// auto, 1 oneDNN, 2 direct, 3 im2col). lenet's two, then first layers with 1, 3 and 4 channels
// by each implementation auto chooses between for them.
#define LENET_CONVS(bench)                                          \
  BENCHMARK(bench)                                                  \
      ->ArgNames({"hw", "cin", "cout", "k", "din", "impl"})         \
      ->Args({28, 1, 32, 5, 0, 0})  /* conv1: 28x28x1 -> 32, k5 */  \
      ->Args({14, 32, 64, 5, 1, 0}) /* conv2: 14x14x32 -> 64, k5 */ \
      ->ArgsProduct({{28}, {1, 3, 4}, {32}, {5}, {0, 1}, {2, 3}})   \
      ->Unit(benchmark::kMillisecond)

void BM_Conv2DForward(benchmark::State& state) {
  ConvRig rig(state);
  for (auto _ : state) {
    rig.layer.forward(rig.params, rig.io());
    benchmark::DoNotOptimize(rig.out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  set_flop_counter(state, rig.gemm_flops());
}
LENET_CONVS(BM_Conv2DForward);

void BM_Conv2DBackward(benchmark::State& state) {
  ConvRig rig(state);
  const bool with_din = state.range(4) != 0;
  rig.layer.forward(rig.params, rig.io());
  for (auto _ : state) {
    rig.layer.backward(rig.params, rig.grads, rig.io(), rig.dout.data(),
                       with_din ? rig.din.data() : nullptr);
    benchmark::DoNotOptimize(rig.din.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  set_flop_counter(state, rig.gemm_flops() * (with_din ? 2 : 1));
}
LENET_CONVS(BM_Conv2DBackward);

// One training step's worth of the layer: forward then backward.
void BM_Conv2DForwardBackward(benchmark::State& state) {
  ConvRig rig(state);
  const bool with_din = state.range(4) != 0;
  for (auto _ : state) {
    rig.layer.forward(rig.params, rig.io());
    rig.layer.backward(rig.params, rig.grads, rig.io(), rig.dout.data(),
                       with_din ? rig.din.data() : nullptr);
    benchmark::DoNotOptimize(rig.din.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  set_flop_counter(state, rig.gemm_flops() * (with_din ? 3 : 2));
}
LENET_CONVS(BM_Conv2DForwardBackward);

// Args: rows (the batch), with 10 classes.
void BM_SoftmaxCrossEntropy(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0)), classes = 10;
  const std::vector<float> logits = random_floats(static_cast<size_t>(n) * classes, 6);
  std::vector<int32_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = i % classes;
  std::vector<float> dlogits(logits.size());
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        softmax_cross_entropy(logits.data(), labels.data(), n, classes, dlogits.data()));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_SoftmaxCrossEntropy)->ArgName("n")->Arg(100)->Arg(1000);

}  // namespace
}  // namespace dtrain
