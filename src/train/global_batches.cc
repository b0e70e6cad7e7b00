#include "train/global_batches.h"

#include <algorithm>

namespace dtrain {

GlobalBatches::GlobalBatches(int batch_size, bool keep_global, int planned_workers,
                             int64_t train_examples)
    : batch_size_(batch_size),
      keep_global_(keep_global),
      planned_workers_(planned_workers),
      train_examples_(train_examples) {}

int64_t GlobalBatches::size(int workers) const {
  return int64_t{batch_size_} * (keep_global_ ? planned_workers_ : workers);
}

int GlobalBatches::largest_slice(int fewest) const {
  if (!keep_global_) return batch_size_;
  const int64_t global = int64_t{batch_size_} * planned_workers_;
  return static_cast<int>((global + fewest - 1) / fewest);
}

DataSlice GlobalBatches::slice(int rank, int workers) const {
  return {.index = rank, .count = workers, .at = position_, .global_batch = size(workers)};
}

// Steps are counted by the job's --workers, whatever the number now.
void GlobalBatches::restart_at(int64_t step) {
  const int64_t global_batch = int64_t{batch_size_} * planned_workers_;
  const int64_t steps_per_epoch = std::max<int64_t>(1, train_examples_ / global_batch);
  position_ = {step / steps_per_epoch, step % steps_per_epoch * global_batch};
}

void GlobalBatches::advance(int workers) {
  position_ = after_batch(position_, size(workers), train_examples_);
}

}  // namespace dtrain
