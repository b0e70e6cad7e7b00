// Towers: tower 0 runs in the caller's thread, towers 1..K-1 on owned threads. Each step has three
// barrier phases: start (the job fields are published), computed (every tower's gradients are
// ready), reduced (every chunk of the average is written and, if asked, updated). The barrier
// orders the plain memory accesses between phases, so the job fields need no further locking.
#include "train/gradient_computer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "base/error.h"

namespace dtrain {
namespace {

// Slice [begin, end) of n examples for tower k of K: sizes differ by at most one.
std::pair<int, int> slice(int n, int k, int towers) {
  return {static_cast<int>(int64_t(n) * k / towers),
          static_cast<int>(int64_t(n) * (k + 1) / towers)};
}

}  // namespace

int threads_per_tower(int threads, int towers) {
  return std::max(1, threads / std::max(1, towers));
}

uint64_t step_seed(uint64_t run_seed, int64_t step, int worker) {
  // splitmix64 over the three: neighbouring steps and workers get unrelated seeds.
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  return mix(mix(mix(run_seed) ^ static_cast<uint64_t>(step)) ^ static_cast<uint64_t>(worker));
}

GradientComputer::Tower::Tower(const Model& model, int max_batch, int team_size)
    : team(team_size), workspace(model, max_batch), grads(model.param_specs()) {}

GradientComputer::GradientComputer(const Model& model, int towers, int max_batch, int team_size)
    : model_(model),
      eval_workspace_(model, Workspace::inference_batch(model, max_batch, 1000),
                      WorkspaceUse::kInference),
      barrier_(towers) {
  if (towers < 1) throw UsageError(fmt::format("--towers {}: must be at least 1", towers));
  if (towers > max_batch) {
    throw UsageError(
        fmt::format("--towers {}: more towers than examples in a batch of {}", towers, max_batch));
  }
  for (int k = 0; k < towers; ++k) {
    const auto [begin, end] = slice(max_batch, k, towers);
    towers_.push_back(std::make_unique<Tower>(model, end - begin + 1, team_size));
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
  ScopedTeam team(&towers_[k]->team);
  for (;;) {
    barrier_.arrive_and_wait();  // start
    if (stopping_) return;
    run_tower(k);
    barrier_.arrive_and_wait();  // computed
    reduce_and_update_chunk(k);
    barrier_.arrive_and_wait();  // reduced
  }
}

void GradientComputer::run_tower(int k) {
  Tower& tower = *towers_[k];
  try {
    const auto [begin, end] = slice(batch_.size, k, towers());
    const int64_t stride = model_.input_size();
    ModelRunner runner(model_, tower.workspace);
    runner.set_step_randomness(step_seed_, begin);
    runner.set_precision(training_precision_, evaluation_precision_);
    tower.times = {};
    tower.loss = runner.compute_gradients(
        *params_, batch_.images + begin * stride, batch_.labels + begin, end - begin, tower.grads,
        &tower.times, batch_.weights != nullptr ? batch_.weights + begin : nullptr);
    tower.weight = static_cast<float>(end - begin) / static_cast<float>(batch_.size);
    tower.loss *= tower.weight;
  } catch (...) {
    tower.error = std::current_exception();
  }
}

void GradientComputer::reduce_and_update_chunk(int k) {
  // A failed tower leaves garbage gradients; compute() rethrows its error and nothing is applied.
  for (const auto& tower : towers_)
    if (tower->error) return;
  const auto start = std::chrono::steady_clock::now();
  // Tower k sums chunk k of the arena over all towers, in tower order, so the result does not
  // depend on thread timing. Chunks start on 16-float (64-byte) boundaries: no two threads write
  // one cache line.
  std::span<float> out = out_->flat();
  const size_t n = out.size(), K = towers_.size();
  auto boundary = [&](size_t t) { return t == K ? n : std::min(n, (n * t / K) & ~size_t{15}); };
  const size_t begin = boundary(k), end = boundary(k + 1);
  // Block by block, so the update reads the summed gradient from L1 instead of memory.
  constexpr size_t kBlock = 4096;
  float* __restrict dst = out.data();
  for (size_t block = begin; block < end; block += kBlock) {
    const size_t block_end = std::min(end, block + kBlock);
    for (size_t t = 0; t < K; ++t) {
      // Weighted by the slice's share of the batch, so the sum is the mean over the batch.
      const float weight = towers_[t]->weight;
      const float* __restrict src = towers_[t]->grads.flat().data();
      if (t == 0) {
        for (size_t i = block; i < block_end; ++i) dst[i] = weight * src[i];
      } else {
        for (size_t i = block; i < block_end; ++i) dst[i] += weight * src[i];
      }
    }
    if (update_ != nullptr) (*update_)(block, block_end);
  }
  towers_[k]->times.update_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

float GradientComputer::compute(const ParamSet& params, const Batch& batch, GradSet& grads,
                                StepTimes* times, const ChunkUpdate* update) {
  ScopedTeam team(&towers_[0]->team);
  if (towers() == 1) {
    ModelRunner runner(model_, towers_[0]->workspace);
    runner.set_step_randomness(step_seed_, 0);
    runner.set_precision(training_precision_, evaluation_precision_);
    const float loss = runner.compute_gradients(params, batch.images, batch.labels, batch.size,
                                                grads, times, batch.weights);
    if (update != nullptr) {
      const auto start = std::chrono::steady_clock::now();
      parallel_tensor_rows(grads,
                           [&](int, size_t, size_t begin, size_t end) { (*update)(begin, end); });
      if (times != nullptr)
        times->update_s +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    return loss;
  }
  params_ = &params;
  batch_ = batch;
  out_ = &grads;
  update_ = update;
  for (auto& tower : towers_) tower->error = nullptr;
  barrier_.arrive_and_wait();  // start
  run_tower(0);
  barrier_.arrive_and_wait();  // computed
  reduce_and_update_chunk(0);
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
    times->update_s += towers_[0]->times.update_s;
  }
  return loss;
}

float GradientComputer::sgd_step(ParamSet& params, const Batch& batch, GradSet& grads, float lr,
                                 StepTimes* times, const ChunkUpdate* after) {
  if (towers() != 1) throw std::logic_error("GradientComputer::sgd_step needs exactly one tower");
  ScopedTeam team(&towers_[0]->team);
  ModelRunner runner(model_, towers_[0]->workspace);
  runner.set_step_randomness(step_seed_, 0);
  runner.set_precision(training_precision_, evaluation_precision_);
  const float loss = runner.sgd_step(params, batch.images, batch.labels, batch.size, grads, lr,
                                     times, batch.weights);
  if (after != nullptr) {
    const auto start = std::chrono::steady_clock::now();
    parallel_tensor_rows(params,
                         [&](int, size_t, size_t begin, size_t end) { (*after)(begin, end); });
    if (times != nullptr)
      times->update_s +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return loss;
}

double GradientComputer::accuracy(const ParamSet& params, const float* images,
                                  const int32_t* labels, int64_t n) {
  ScopedTeam team(&towers_[0]->team);
  ModelRunner runner(model_, eval_workspace_);
  runner.set_precision(training_precision_, evaluation_precision_);
  return runner.accuracy(params, images, labels, n);
}

GradientComputer::Evaluation GradientComputer::evaluate(const ParamSet& params, const float* images,
                                                        const int32_t* labels, int64_t n) {
  ScopedTeam team(&towers_[0]->team);
  ModelRunner runner(model_, eval_workspace_);
  runner.set_precision(training_precision_, evaluation_precision_);
  return runner.evaluate(params, images, labels, n);
}

}  // namespace dtrain
