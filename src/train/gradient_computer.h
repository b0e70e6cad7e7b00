// Computes one step's gradients over a batch: in the calling thread (one tower), or split over K
// towers on K threads, each a replica of the model on its slice of the batch, whose gradients are
// then averaged (the multi-GPU tower pattern, on CPU threads). The result is the gradient of the
// mean loss over the whole batch either way, up to float reassociation. Each tower has a ThreadTeam
// of --threads / --towers threads that splits its matrix products (intra-op parallelism); BLAS
// itself stays single-threaded, so dtrain owns every thread that runs.
//
// The optimizer update can run inside the step: each thread sums its chunk of the arena over the
// towers and then updates that chunk, so the update is parallel and touches memory that is already
// in the thread's cache.
#pragma once

#include <barrier>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "data/batcher.h"
#include "nn/model.h"
#include "nn/param_set.h"
#include "tensor/thread_team.h"

namespace dtrain {

// Threads of each tower's team for --threads T and --towers K: T / K, at least 1.
int threads_per_tower(int threads, int towers);

// The seed of one step's random draws (dropout) for worker `worker` of a run seeded `run_seed`:
// a pure function of the three, so a restarted run draws what the first run drew at that step.
uint64_t step_seed(uint64_t run_seed, int64_t step, int worker);

class GradientComputer {
 public:
  // towers >= 1; max_batch is the largest batch compute() will see; team_size threads per tower.
  GradientComputer(const Model& model, int towers, int max_batch, int team_size = 1);
  ~GradientComputer();
  GradientComputer(const GradientComputer&) = delete;
  GradientComputer& operator=(const GradientComputer&) = delete;

  int towers() const { return static_cast<int>(towers_.size()); }

  // The seed of the random draws (dropout) of the next compute() or sgd_step(); the training loop
  // sets it from (run seed, global step) so a step draws the same masks whoever computes it.
  // Towers draw for their rows as one tower would for the whole batch.
  void set_step_seed(uint64_t seed) { step_seed_ = seed; }

  // The precision of the steps' products and of the evaluations' (ModelRunner::set_precision).
  void set_precision(Precision training, Precision evaluation) {
    training_precision_ = training;
    evaluation_precision_ = evaluation;
  }

  // Applies the step's update to the arena range [begin, end) of the parameters, from grads.
  using ChunkUpdate = std::function<void(size_t begin, size_t end)>;

  // Writes the gradient of the mean loss over the batch into grads and returns that loss. If
  // update is set, it is called on disjoint chunks covering the whole arena, once grads holds
  // the final values of that chunk, and before compute returns; no tower reads params by then.
  // The chunks cover every tensor; the padding between tensors may be left out.
  // REQUIRES: batch.size <= max_batch and batch.size >= towers.
  float compute(const ParamSet& params, const Batch& batch, GradSet& grads,
                StepTimes* times = nullptr, const ChunkUpdate* update = nullptr);

  // One plain SGD step (params -= lr·gradient of the mean loss) folded into backward, which saves
  // a pass over the gradients (see ModelRunner::sgd_step); grads is scratch. If after is set, it
  // is then called on disjoint chunks covering the whole arena, split over the team (the moving
  // average). Returns the loss before the step. Only for one tower: towers must average their
  // gradients before anything is applied. Chunks as for compute().
  // REQUIRES: towers() == 1 and batch.size <= max_batch.
  float sgd_step(ParamSet& params, const Batch& batch, GradSet& grads, float lr,
                 StepTimes* times = nullptr, const ChunkUpdate* after = nullptr);

  // Test accuracy etc.: a forward-only pass in the calling thread.
  double accuracy(const ParamSet& params, const float* images, const int32_t* labels, int64_t n);
  // The same pass, with the mean of the model's loss over the n examples (ModelRunner::evaluate).
  using Evaluation = ModelRunner::Evaluation;
  Evaluation evaluate(const ParamSet& params, const float* images, const int32_t* labels,
                      int64_t n);

 private:
  struct Tower {
    Tower(const Model& model, int max_batch, int team_size);
    ThreadTeam team;
    Workspace workspace;
    GradSet grads;
    float loss = 0;
    float weight = 0;  // the slice's share of the batch
    StepTimes times;
    std::exception_ptr error;
  };

  void run_tower(int k);
  void reduce_and_update_chunk(int k);
  void worker_loop(int k);

  const Model& model_;
  std::vector<std::unique_ptr<Tower>> towers_;
  Workspace eval_workspace_;

  // Per-step job, written by compute() before the start barrier and read by the towers after it.
  const ParamSet* params_ = nullptr;
  Batch batch_;
  GradSet* out_ = nullptr;
  const ChunkUpdate* update_ = nullptr;
  uint64_t step_seed_ = 0;
  Precision training_precision_ = Precision::kFp32;
  Precision evaluation_precision_ = Precision::kFp32;
  bool stopping_ = false;
  // Three phases per step: start, gradients computed, reduction done.
  std::barrier<> barrier_;
  std::vector<std::jthread> threads_;
};

}  // namespace dtrain
