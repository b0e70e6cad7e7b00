// Where an all-reduce job stands in its data over however many workers it has now
// (docs/elastic.md): the examples of a step — the job's --workers × --batch_size under
// --elastic_batch global, else --batch_size from each worker there is — and where the next one
// starts.
#pragma once

#include <cstdint>

#include "data/batch_source.h"
#include "train/strategy.h"

namespace dtrain {

class GlobalBatches {
 public:
  // planned_workers: the job's --workers, by which its steps are counted.
  GlobalBatches(int batch_size, bool keep_global, int planned_workers, int64_t train_examples);

  // The examples of a step over `workers` workers.
  int64_t size(int workers) const;
  // The most examples one worker's slice ever holds, with `fewest` workers at the least.
  int largest_slice(int fewest) const;
  // The slice of the next global batch that worker `rank` of `workers` takes.
  DataSlice slice(int rank, int workers) const;

  // The next global batch is the one of global step `step` (a fresh job's start, or a resume).
  void restart_at(int64_t step);
  // A step of `workers` workers took its global batch.
  void advance(int workers);
  // Where the next global batch starts, for the member furthest along to share.
  DataPosition& position() { return position_; }

 private:
  const int batch_size_;
  const bool keep_global_;
  const int planned_workers_;
  const int64_t train_examples_;
  DataPosition position_;
};

}  // namespace dtrain
