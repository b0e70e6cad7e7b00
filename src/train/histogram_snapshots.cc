// The buffers are reused only when the snapshot's last reader has let go of them.
#include "train/histogram_snapshots.h"

#include <atomic>

namespace dtrain {

std::shared_ptr<const std::vector<NamedValues>> HistogramSnapshots::take(const ParamSet& params,
                                                                         const GradSet& grads) {
  if (!buffers_ || buffers_.use_count() > 1) {
    buffers_ = std::make_shared<std::vector<NamedValues>>();
    for (size_t i = 0; i < params.count(); ++i) buffers_->push_back({params.spec(i).name, {}});
    for (size_t i = 0; i < grads.count(); ++i)
      buffers_->push_back({"gradients_on_average/" + grads.spec(i).name, {}});
  }
  // Reading a use count of 1 the sink's thread left when it dropped its reference (a release),
  // then this fence: what that thread did with the buffers happens before the writes below.
  std::atomic_thread_fence(std::memory_order_acquire);
  std::vector<NamedValues>& tensors = *buffers_;
  for (size_t i = 0; i < params.count(); ++i)
    tensors[i].values.assign(params.values(i).begin(), params.values(i).end());
  for (size_t i = 0; i < grads.count(); ++i)
    tensors[params.count() + i].values.assign(grads.values(i).begin(), grads.values(i).end());
  return buffers_;
}

}  // namespace dtrain
