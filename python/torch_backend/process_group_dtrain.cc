// Tensors checked and seen as bytes or floats; the collectives are the Communicator's.
#include "process_group_dtrain.h"

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <fmt/format.h>

#include <cstring>
#include <span>

namespace dtrain::torch_backend {
namespace {

// A Work that is already over, whose Future holds `outputs` as DDP's reducer expects of a
// collective's (a list of tensors).
c10::intrusive_ptr<c10d::Work> completed(std::vector<at::Tensor> outputs) {
  auto future =
      c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  future->markCompleted(c10::IValue(std::move(outputs)));
  return c10d::Work::create_from_future(future);
}

std::string describe(const at::Tensor& t) {
  return fmt::format("a {} tensor of shape {} on {}", std::string(c10::toString(t.scalar_type())),
                     c10::str(t.sizes()), t.device().str());
}

// What every collective here moves: one tensor, on the CPU, dense and contiguous.
const at::Tensor& single_tensor(const std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, "dtrain backend: ", op, " takes one tensor per call, got ",
              tensors.size());
  const at::Tensor& t = tensors[0];
  TORCH_CHECK(t.device().is_cpu(), "dtrain backend: ", op, " runs on CPU tensors, got ",
              describe(t));
  TORCH_CHECK(t.layout() == at::kStrided && t.is_contiguous(), "dtrain backend: ", op,
              " needs a dense contiguous tensor, got ", describe(t), " with strides ",
              c10::str(t.strides()), "; call .contiguous() first");
  return t;
}

std::span<std::byte> bytes_of(const at::Tensor& t) {
  return {static_cast<std::byte*>(t.data_ptr()), static_cast<size_t>(t.numel() * t.element_size())};
}

ReduceOp reduce_op_of(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return ReduceOp::kSum;
    case c10d::ReduceOp::AVG:
      return ReduceOp::kAverage;
    default:
      break;
  }
  TORCH_CHECK(false, "dtrain backend: all_reduce supports ReduceOp.SUM and ReduceOp.AVG, not ",
              static_cast<int>(op.op_),
              " (PRODUCT=2, MIN=3, MAX=4, BAND..BXOR=5..7, PREMUL_SUM=8)");
}

}  // namespace

ProcessGroupDtrain::ProcessGroupDtrain(std::unique_ptr<RankGroup> group)
    : c10d::ProcessGroup(group->rank(), group->size()), group_(std::move(group)) {
  init();  // torch's usage logging, as its own backends do
}

ProcessGroupDtrain::~ProcessGroupDtrain() = default;

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single_tensor(tensors, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "dtrain backend: broadcast has one tensor, rootTensor ",
              opts.rootTensor, " is not it");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(),
              "dtrain backend: broadcast from rank ", opts.rootRank,
              ", which is not a rank of this group of ", getSize());
  {
    std::lock_guard lock(mutex_);
    group_->communicator().broadcast_bytes(bytes_of(t), static_cast<int>(opts.rootRank));
  }
  return completed(tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  const at::Tensor& t = single_tensor(tensors, "all_reduce");
  TORCH_CHECK(t.scalar_type() == at::kFloat,
              "dtrain backend: all_reduce reduces float32 tensors, got ", describe(t));
  const ReduceOp op = reduce_op_of(opts.reduceOp);
  {
    std::lock_guard lock(mutex_);
    group_->communicator().allreduce({t.data_ptr<float>(), static_cast<size_t>(t.numel())}, op);
  }
  return completed(tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  const at::Tensor& input = single_tensor(inputs, "all_gather");
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
              "dtrain backend: all_gather needs one list of ", getSize(), " output tensors");
  for (const at::Tensor& out : outputs[0]) {
    TORCH_CHECK(out.device().is_cpu() && out.scalar_type() == input.scalar_type() &&
                    out.numel() == input.numel(),
                "dtrain backend: all_gather's outputs must be CPU tensors like the input (",
                describe(input), "), got ", describe(out));
  }
  // Gathered into one buffer, then spread: the outputs are separate tensors.
  at::Tensor all = at::empty({getSize(), input.numel()}, input.options());
  {
    std::lock_guard lock(mutex_);
    group_->communicator().allgather_bytes(bytes_of(input), bytes_of(all));
  }
  for (int r = 0; r < getSize(); ++r) outputs[0][r].copy_(all[r].view(outputs[0][r].sizes()));
  return completed(outputs[0]);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& /*opts*/) {
  std::vector<at::Tensor> inputs{input};
  std::vector<at::Tensor> outputs{output};
  single_tensor(inputs, "all_gather_into_tensor");
  single_tensor(outputs, "all_gather_into_tensor");
  TORCH_CHECK(
      output.scalar_type() == input.scalar_type() && output.numel() == input.numel() * getSize(),
      "dtrain backend: all_gather_into_tensor needs an output of ", getSize(), " times the input (",
      describe(input), "), got ", describe(output));
  {
    std::lock_guard lock(mutex_);
    group_->communicator().allgather_bytes(bytes_of(input), bytes_of(output));
  }
  return completed(outputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::barrier(const c10d::BarrierOptions& /*opts*/) {
  {
    std::lock_guard lock(mutex_);
    group_->communicator().barrier();
  }
  return completed({});
}

}  // namespace dtrain::torch_backend
