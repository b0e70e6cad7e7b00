// Towers: tower 0 runs in the caller's thread, towers 1..K-1 on owned threads. Each step has three
// barrier phases: start (the job fields are published), computed (every tower's gradients are
// ready), reduced (every chunk of the average is written). The barrier orders the plain memory
// accesses between phases, so the job fields need no further locking.
#include "train/gradient_computer.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/error.h"

namespace dtrain {
namespace {

// Slice [begin, end) of n examples for tower k of K: sizes differ by at most one.
std::pair<int, int> slice(int n, int k, int towers) {
  return {static_cast<int>(int64_t(n) * k / towers),
          static_cast<int>(int64_t(n) * (k + 1) / towers)};
}

}  // namespace

GradientComputer::Tower::Tower(const Model& model, int max_batch)
    : workspace(model, max_batch), grads(model.param_specs()) {}

GradientComputer::GradientComputer(const Model& model, int towers, int max_batch)
    : model_(model), eval_workspace_(model, std::max(max_batch, 1000)), barrier_(towers) {
  if (towers < 1) throw UsageError(fmt::format("--towers {}: must be at least 1", towers));
  if (towers > max_batch) {
    throw UsageError(
        fmt::format("--towers {}: more towers than examples in a batch of {}", towers, max_batch));
  }
  for (int k = 0; k < towers; ++k) {
    const auto [begin, end] = slice(max_batch, k, towers);
    towers_.push_back(std::make_unique<Tower>(model, end - begin + 1));
  }
  for (int k = 1; k < towers; ++k) threads_.emplace_back([this, k] { worker_loop(k); });
}

GradientComputer::~GradientComputer() {
  if (threads_.empty()) return;
  stopping_ = true;
  barrier_
      .arrive_and_wait();  // releases the towers waiting at "start"; they see stopping_ and exit
}

void GradientComputer::worker_loop(int k) {
  for (;;) {
    barrier_.arrive_and_wait();  // start
    if (stopping_) return;
    run_tower(k);
    barrier_.arrive_and_wait();  // computed
    reduce_chunk(k);
    barrier_.arrive_and_wait();  // reduced
  }
}

void GradientComputer::run_tower(int k) {
  Tower& tower = *towers_[k];
  try {
    const auto [begin, end] = slice(batch_.size, k, towers());
    const int64_t stride = model_.input_size();
    ModelRunner runner(model_, tower.workspace);
    tower.times = {};
    tower.loss =
        runner.compute_gradients(*params_, batch_.images + begin * stride, batch_.labels + begin,
                                 end - begin, tower.grads, &tower.times);
    // Weight by the slice's share so the sum over towers is the mean over the batch.
    const float weight = static_cast<float>(end - begin) / static_cast<float>(batch_.size);
    for (float& g : tower.grads.flat()) g *= weight;
    tower.loss *= weight;
  } catch (...) {
    tower.error = std::current_exception();
  }
}

void GradientComputer::reduce_chunk(int k) {
  // Tower k sums chunk k of the arena over all towers, in tower order, so the result does not
  // depend on thread timing.
  std::span<float> out = out_->flat();
  const size_t n = out.size(), K = towers_.size();
  const size_t begin = n * k / K, end = n * (k + 1) / K;
  float* __restrict dst = out.data();
  std::copy(towers_[0]->grads.flat().begin() + begin, towers_[0]->grads.flat().begin() + end,
            dst + begin);
  for (size_t t = 1; t < K; ++t) {
    const float* __restrict src = towers_[t]->grads.flat().data();
    for (size_t i = begin; i < end; ++i) dst[i] += src[i];
  }
}

float GradientComputer::compute(const ParamSet& params, const Batch& batch, GradSet& grads,
                                StepTimes* times) {
  if (towers() == 1) {
    ModelRunner runner(model_, towers_[0]->workspace);
    return runner.compute_gradients(params, batch.images, batch.labels, batch.size, grads, times);
  }
  params_ = &params;
  batch_ = batch;
  out_ = &grads;
  for (auto& tower : towers_) tower->error = nullptr;
  barrier_.arrive_and_wait();  // start
  run_tower(0);
  barrier_.arrive_and_wait();  // computed
  reduce_chunk(0);
  barrier_.arrive_and_wait();  // reduced

  float loss = 0.0f;
  for (auto& tower : towers_) {
    if (tower->error) std::rethrow_exception(tower->error);
    loss += tower->loss;
  }
  if (times != nullptr) {
    // Wall time of the step is set by the slowest tower; tower 0 stands for them all.
    times->forward_s += towers_[0]->times.forward_s;
    times->backward_s += towers_[0]->times.backward_s;
  }
  return loss;
}

double GradientComputer::accuracy(const ParamSet& params, const float* images,
                                  const int32_t* labels, int64_t n) {
  ModelRunner runner(model_, eval_workspace_);
  return runner.accuracy(params, images, labels, n);
}

}  // namespace dtrain
