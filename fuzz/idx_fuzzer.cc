// libFuzzer target for the IDX reader (data/idx.h): each input is written to a scratch file and
// read back with read_idx, raw or gzip as its first bytes say, exactly as MNIST files are read.
// DataError is the expected rejection, and TooLargeError for a header that promises more than
// this machine's memory; any other exception, a sanitizer report, or an accepted file whose
// contents disagree with its header is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "base/error.h"
#include "data/idx.h"
#include "scratch_file.h"

namespace {

void require(bool holds, const char* property) {
  if (holds) return;
  std::fprintf(stderr, "idx_fuzzer: accepted input breaks: %s\n", property);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const dtrain::fuzzing::ScratchFile scratch("dtrain_idx_fuzzer");
  dtrain::IdxArray array;
  try {
    array = dtrain::read_idx(scratch.write(data, size));
  } catch (const dtrain::DataError&) {
    return 0;
  } catch (const dtrain::TooLargeError&) {
    return 0;
  }
  require(!array.dims.empty() && array.dims.size() <= 4, "1 to 4 dimensions");
  uint64_t count = 1;
  for (uint32_t dim : array.dims) count *= dim;  // cannot wrap: the data is in memory
  require(array.data.size() == count, "data holds the product of the dimensions");
  return 0;
}
