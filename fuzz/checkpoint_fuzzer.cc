// libFuzzer target for the checkpoint reader (ckpt/checkpoint.h): each input is written to a
// scratch file and read back with read_checkpoint. CheckpointError is the expected rejection; any
// other exception, a sanitizer report, or an accepted checkpoint that breaks the reader's promises
// (valid F32 shapes that match the values, unique names, a non-negative step) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "base/error.h"
#include "ckpt/checkpoint.h"
#include "scratch_file.h"

namespace {

void require(bool holds, const char* property) {
  if (holds) return;
  std::fprintf(stderr, "checkpoint_fuzzer: accepted input breaks: %s\n", property);
  std::abort();
}

// The shape's element count, which a valid shape keeps within int64 (num_elements computes it
// without an overflow check); false if it does not.
bool element_count(const dtrain::Shape& shape, int64_t& count) {
  count = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(count, d, &count)) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const dtrain::fuzzing::ScratchFile scratch("dtrain_checkpoint_fuzzer");
  dtrain::Checkpoint ckpt;
  try {
    ckpt = dtrain::read_checkpoint(scratch.write(data, size));
  } catch (const dtrain::CheckpointError&) {
    return 0;
  }
  require(ckpt.global_step >= 0, "global step is non-negative");
  std::set<std::string> names;
  for (const dtrain::CheckpointTensor& t : ckpt.tensors) {
    require(names.insert(t.name).second, "tensor names are unique");
    require(t.name != "__metadata__", "no tensor is named __metadata__");
    int64_t count = 0;
    require(element_count(t.shape, count), "shape's element count fits in int64");
    require(static_cast<uint64_t>(count) == t.values.size(), "values match the shape");
    require(ckpt.find(t.name) == &t, "find() returns the tensor by name");
  }
  return 0;
}
