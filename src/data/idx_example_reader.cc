// IdxExampleReader: both headers checked at open, so a mismatched pair fails before training
// starts; then one image's bytes and one label byte per example.
#include "data/idx_example_reader.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/checked_math.h"
#include "base/error.h"
#include "base/machine_memory.h"

namespace dtrain {
namespace {

std::string dims_string(const std::vector<uint32_t>& dims) {
  return fmt::format("{}", fmt::join(dims, "x"));
}

}  // namespace

IdxExampleReader::IdxExampleReader(const std::filesystem::path& images_path,
                                   const std::filesystem::path& labels_path)
    : images_(images_path), labels_(labels_path) {
  const std::vector<uint32_t>& image_dims = images_.dims();
  if (image_dims.size() < 2) {
    throw DataError(fmt::format("{}: expected at least 2 dimensions (count x example), got {} ({})",
                                images_path.string(), image_dims.size(), dims_string(image_dims)));
  }
  if (labels_.dims().size() != 1) {
    throw DataError(fmt::format("{}: expected 1 dimension (count), got {} ({})",
                                labels_path.string(), labels_.dims().size(),
                                dims_string(labels_.dims())));
  }
  count_ = image_dims[0];
  feature_count_ = 1;
  for (size_t i = 1; i < image_dims.size(); ++i) {
    if (__builtin_mul_overflow(feature_count_, int64_t{image_dims[i]}, &feature_count_)) {
      throw DataError(fmt::format("{}: dims {} overflow a 64-bit example size",
                                  images_path.string(), dims_string(image_dims)));
    }
  }
  // One example is held at a time, but it must fit: as its bytes and as float32 features.
  const AllocationLimit limit = allocation_limit();
  if (static_cast<uint64_t>(saturating_mul(feature_count_, 1 + sizeof(float))) > limit.bytes) {
    throw TooLargeError(fmt::format(
        "{}: dims {} make examples of {} values, which need {} each, more than {}",
        images_path.string(), dims_string(image_dims), feature_count_,
        format_bytes(static_cast<uint64_t>(saturating_mul(feature_count_, 1 + sizeof(float)))),
        limit.text));
  }
  if (feature_count_ == 0) {
    throw DataError(fmt::format("{}: dims {} make an example of 0 elements", images_path.string(),
                                dims_string(image_dims)));
  }
  if (labels_.dims()[0] != image_dims[0]) {
    throw DataError(fmt::format("{} holds {} images but {} holds {} labels", images_path.string(),
                                image_dims[0], labels_path.string(), labels_.dims()[0]));
  }
}

bool IdxExampleReader::next(std::span<float> features, int32_t& label) {
  if (index_ == count_) {
    images_.expect_end();
    labels_.expect_end();
    return false;
  }
  // Sized at the first example, not at open: a file of no examples may promise any size.
  pixels_.resize(feature_count_);
  images_.read(pixels_);
  uint8_t label_byte = 0;
  labels_.read(std::span<uint8_t>(&label_byte, 1));
  // Division rather than multiplication by 1/255, as make_dataset: the same floats either way.
  std::transform(pixels_.begin(), pixels_.end(), features.begin(),
                 [](uint8_t x) { return static_cast<float>(x) / 255.0f; });
  label = label_byte;
  ++index_;
  return true;
}

std::string IdxExampleReader::position() const {
  return fmt::format("{} at example {}", images_.path().string(), index_);
}

}  // namespace dtrain
