// Computes one step's gradients over a batch: in the calling thread (one tower), or split over K
// towers on K threads, each a replica of the model on its slice of the batch, whose gradients are
// then averaged (the multi-GPU tower pattern, on CPU threads). The result is the gradient of the
// mean loss over the whole batch either way, up to float reassociation.
#pragma once

#include <barrier>
#include <exception>
#include <memory>
#include <thread>
#include <vector>

#include "data/batcher.h"
#include "nn/model.h"
#include "nn/param_set.h"

namespace dtrain {

class GradientComputer {
 public:
  // towers >= 1; max_batch is the largest batch compute() will see.
  GradientComputer(const Model& model, int towers, int max_batch);
  ~GradientComputer();
  GradientComputer(const GradientComputer&) = delete;
  GradientComputer& operator=(const GradientComputer&) = delete;

  int towers() const { return static_cast<int>(towers_.size()); }

  // Writes the gradient of the mean loss over the batch into grads and returns that loss.
  // REQUIRES: batch.size <= max_batch and batch.size >= towers.
  float compute(const ParamSet& params, const Batch& batch, GradSet& grads,
                StepTimes* times = nullptr);

  // Test accuracy etc.: a forward-only pass in the calling thread.
  double accuracy(const ParamSet& params, const float* images, const int32_t* labels, int64_t n);

 private:
  struct Tower {
    Tower(const Model& model, int max_batch);
    Workspace workspace;
    GradSet grads;
    float loss = 0;
    StepTimes times;
    std::exception_ptr error;
  };

  void run_tower(int k);
  void reduce_chunk(int k);
  void worker_loop(int k);

  const Model& model_;
  std::vector<std::unique_ptr<Tower>> towers_;
  Workspace eval_workspace_;

  // Per-step job, written by compute() before the start barrier and read by the towers after it.
  const ParamSet* params_ = nullptr;
  Batch batch_;
  GradSet* out_ = nullptr;
  bool stopping_ = false;
  // Three phases per step: start, gradients computed, reduction done.
  std::barrier<> barrier_;
  std::vector<std::jthread> threads_;
};

}  // namespace dtrain
