// make_tfrecord_example_reader: an ExampleReader over TfRecordReader and TfExampleDecoder. The
// first record is read when the file is opened, to learn feature_count(), and handed out first.
#include <fmt/format.h>

#include "base/error.h"
#include "data/example_files.h"
#include "data/tf_example.h"
#include "data/tfrecord.h"

namespace dtrain {
namespace {

class TfRecordExampleReader : public ExampleReader {
 public:
  TfRecordExampleReader(const std::filesystem::path& path, const DataOptions& options)
      : records_(path, options.compression),
        decoder_(options),
        image_feature_(options.image_feature),
        label_feature_(options.label_feature) {
    if (!records_.next(record_)) {
      throw DataError(
          fmt::format("{}: holds no records, so it has no examples to learn the "
                      "feature count from",
                      path.string()));
    }
    peeked_ = true;
    feature_count_ = decoder_.feature_count(record_, place());
  }

  int64_t feature_count() const override { return feature_count_; }

  bool next(std::span<float> features, int32_t& label) override {
    if (!peeked_ && !records_.next(record_)) return false;
    peeked_ = false;
    decoder_.decode(record_, features, label, place());
    return true;
  }

  bool pixels() const override { return decoder_.pixels(); }
  std::string label_source() const override { return fmt::format("feature '{}'", label_feature_); }
  std::string feature_name(int64_t i) const override {
    return fmt::format("feature '{}' value {}", image_feature_, i);
  }

  std::string position() const override {
    return fmt::format("{} at byte {}", records_.path().string(), records_.record_offset());
  }

 private:
  // The record last read, for errors.
  std::string place() const {
    return fmt::format("{}: record {} (starting at byte {})", records_.path().string(),
                       records_.records_read() - 1, records_.record_offset());
  }

  TfRecordReader records_;
  TfExampleDecoder decoder_;
  std::string image_feature_, label_feature_;
  std::string record_;  // reused: one allocation for the whole file
  bool peeked_ = false;
  int64_t feature_count_ = 0;
};

}  // namespace

std::unique_ptr<ExampleReader> make_tfrecord_example_reader(const std::filesystem::path& path,
                                                            const DataOptions& options) {
  return std::make_unique<TfRecordExampleReader>(path, options);
}

}  // namespace dtrain
