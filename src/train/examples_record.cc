// The --record_examples file.
#include "train/examples_record.h"

#include <fmt/format.h>
#include <unistd.h>

#include <string>

#include "base/error.h"

namespace dtrain {

ExamplesRecord::ExamplesRecord(const std::filesystem::path& path, bool distributed, int worker) {
  std::filesystem::path file = path;
  if (distributed) file += fmt::format(".worker{}.{}", worker, ::getpid());
  out_.open(file, std::ios::app);
  if (!out_) throw IoError(fmt::format("--record_examples: cannot write {}", file.string()));
}

void ExamplesRecord::write(int64_t step, int64_t epoch, const Batch& batch, int64_t width) {
  if (!out_.is_open()) return;
  std::string line = fmt::format("{} {}", step, epoch);
  for (int i = 0; i < batch.size; ++i) line += fmt::format(" {}", batch.images[i * width]);
  out_ << line << '\n' << std::flush;  // whole lines, even if killed
}

}  // namespace dtrain
