// libFuzzer target for the Keras model JSON reader (nn/keras_json.h). UsageError (any
// dtrain::Error) is the expected rejection; any other exception, a sanitizer report, or an
// accepted spec that does not read back equal from its own Keras 3 JSON is a finding.
//
// Input: the JSON text.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "base/error.h"
#include "nn/keras_json.h"
#include "nn/keras_json_writer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  dtrain::ModelSpec spec;
  try {
    spec = dtrain::read_keras_json(text, "fuzz.json");
  } catch (const dtrain::Error&) {
    return 0;
  }
  if (!(dtrain::read_keras_json(dtrain::to_keras_json(spec).dump(), "again.json") == spec)) {
    std::fprintf(stderr, "keras_json_fuzzer: an accepted spec does not round-trip\n");
    std::abort();
  }
  return 0;
}
