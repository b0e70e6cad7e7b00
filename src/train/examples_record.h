// --record_examples FILE: which examples each step of this worker trained on, one line a step, so
// that a test can count what an elastic job trained on (train/train_config.h says the format).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>

#include "data/batch_source.h"

namespace dtrain {

class ExamplesRecord {
 public:
  ExamplesRecord() = default;  // disabled: write() does nothing
  // Appends to path, or to path.worker<N>.<pid> for worker N of a cluster (a restarted worker
  // writes a file of its own beside its predecessor's). Throws IoError naming the file.
  ExamplesRecord(const std::filesystem::path& path, bool distributed, int worker);

  bool enabled() const { return out_.is_open(); }
  // "STEP EPOCH X X ...", X the first of the `width` features of each example of batch.
  void write(int64_t step, int64_t epoch, const Batch& batch, int64_t width);

 private:
  std::ofstream out_;
};

}  // namespace dtrain
