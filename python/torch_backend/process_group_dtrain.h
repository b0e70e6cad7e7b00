// The "dtrain" backend of torch.distributed: a c10d::ProcessGroup (torch 1.13's API) whose
// collectives run on a RankGroup, dtrain's ring over its authenticated transport. It does what
// DistributedDataParallel on CPU tensors needs — broadcast (any dtype), all-reduce (float32, sum
// and average), all-gather (any dtype) and barrier — and refuses the rest with a RuntimeError
// that names the operation, the dtype or the reduction.
//
// Collectives run to the end on the calling thread, so every Work comes back completed (with the
// completed Future DDP's reducer reads); a failure is thrown by the call itself.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <vector>

#include "collective/rank_group.h"

namespace dtrain::torch_backend {

class ProcessGroupDtrain final : public c10d::ProcessGroup {
 public:
  explicit ProcessGroupDtrain(std::unique_ptr<RankGroup> group);
  ~ProcessGroupDtrain() override;

  const std::string getBackendName() const override { return "dtrain"; }

  // Rank opts.rootRank's tensor to every rank's, bit for bit. REQUIRES: one dense CPU tensor.
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  // Sum or average (ReduceOp SUM, AVG) of one dense CPU float32 tensor, in place.
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  // outputs[0][r] = rank r's inputs[0]. REQUIRES: world-size outputs like the input.
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  // Rank r's input at [r * input.numel(), ...) of `output`, with no copy.
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // torch calls from the Python thread and from autograd's; the ring takes one at a time, and
  // every rank must see the same order, which callers guarantee as they must for Gloo.
  std::mutex mutex_;
  std::unique_ptr<RankGroup> group_;
};

}  // namespace dtrain::torch_backend
