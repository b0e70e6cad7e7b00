// An IDX image file and its label file read as one stream of examples (ExampleReader), holding one
// example at a time: how IDX files larger than memory are streamed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/example_reader.h"
#include "data/idx.h"

namespace dtrain {

// Example i is image i of images_path, dims (count, d1, d2, ...), as d1 * d2 * ... floats x / 255,
// and label i of labels_path, dims (count). Compression is recognised by each file's gzip magic, as
// read_idx does. Not thread-safe.
class IdxExampleReader final : public ExampleReader {
 public:
  // Opens both files and checks their headers. Throws DataError naming the file for anything
  // read_idx rejects, an image file of fewer than 2 dimensions or with an empty example, a label
  // file of other than 1 dimension, or counts that differ (naming both files).
  IdxExampleReader(const std::filesystem::path& images_path,
                   const std::filesystem::path& labels_path);

  int64_t feature_count() const override { return feature_count_; }
  // At the end, also checks that neither file holds bytes after its data.
  bool next(std::span<float> features, int32_t& label) override;
  std::optional<int64_t> example_count() const override { return count_; }
  // "<images file> at example 17".
  std::string position() const override;
  std::string label_source() const override {
    return "the IDX file " + labels_.path().filename().string();
  }

 private:
  IdxFileReader images_;
  IdxFileReader labels_;
  int64_t feature_count_ = 0;
  int64_t count_ = 0;
  int64_t index_ = 0;  // the example next() reads next
  std::vector<uint8_t> pixels_;
};

}  // namespace dtrain
