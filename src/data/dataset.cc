// IDX pairs to Datasets: validate an (images, labels) pair of IDX arrays once, then convert row
// ranges of it to float Datasets, so the train / validation split copies each pixel exactly once.
#include "data/dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace dtrain {
namespace {

std::string dims_string(const std::vector<uint32_t>& dims) {
  return fmt::format("{}", fmt::join(dims, "x"));
}

// The number of elements in one example of an image array of dims (count, d1, d2, ...).
uint64_t example_size_of(const std::vector<uint32_t>& dims) {
  uint64_t size = 1;
  for (size_t i = 1; i < dims.size(); ++i) size *= dims[i];
  return size;
}

// Checks that images is (count, d1, ...) with a non-empty example and labels (count), each holding
// the bytes its dims promise; returns count.
int64_t validate_pair(const IdxArray& images, const IdxArray& labels,
                      const std::string& images_name, const std::string& labels_name) {
  if (images.dims.size() < 2) {
    throw DataError(fmt::format("{}: expected at least 2 dimensions (count x example), got {} ({})",
                                images_name, images.dims.size(), dims_string(images.dims)));
  }
  const uint64_t example_size = example_size_of(images.dims);
  if (example_size == 0) {
    throw DataError(fmt::format("{}: dims {} make an example of 0 elements", images_name,
                                dims_string(images.dims)));
  }
  if (labels.dims.size() != 1) {
    throw DataError(fmt::format("{}: expected 1 dimension (count), got {} ({})", labels_name,
                                labels.dims.size(), dims_string(labels.dims)));
  }
  // read_idx guarantees these; arrays built by hand (tests, other readers) might not.
  if (images.data.size() != uint64_t{images.dims[0]} * example_size) {
    throw DataError(fmt::format("{}: dims {} promise {} bytes, array holds {}", images_name,
                                dims_string(images.dims), uint64_t{images.dims[0]} * example_size,
                                images.data.size()));
  }
  if (labels.data.size() != labels.dims[0]) {
    throw DataError(fmt::format("{}: dims {} promise {} bytes, array holds {}", labels_name,
                                dims_string(labels.dims), labels.dims[0], labels.data.size()));
  }
  if (images.dims[0] != labels.dims[0]) {
    throw DataError(fmt::format("{} holds {} images but {} holds {} labels", images_name,
                                images.dims[0], labels_name, labels.dims[0]));
  }
  return images.dims[0];
}

// MNIST's promise on top of validate_pair: images of 28x28 pixels and labels 0..9.
void validate_mnist_shape(const IdxArray& images, const IdxArray& labels,
                          const std::string& images_name, const std::string& labels_name) {
  if (images.dims.size() != 3) {
    throw DataError(fmt::format("{}: expected 3 dimensions (count x 28 x 28), got {} ({})",
                                images_name, images.dims.size(), dims_string(images.dims)));
  }
  if (images.dims[1] != kMnistImageSide || images.dims[2] != kMnistImageSide) {
    throw DataError(fmt::format("{}: expected images of 28x28 pixels, got {}x{}", images_name,
                                images.dims[1], images.dims[2]));
  }
  const auto bad = std::find_if(labels.data.begin(), labels.data.end(),
                                [](uint8_t label) { return label >= kMnistClasses; });
  if (bad != labels.data.end()) {
    throw DataError(fmt::format("{}: label {} at index {} is outside 0..9", labels_name, *bad,
                                bad - labels.data.begin()));
  }
}

// REQUIRES: validate_pair accepted (images, labels) and 0 <= begin <= end <= count.
Dataset convert_rows(const IdxArray& images, const IdxArray& labels, int64_t begin, int64_t end,
                     int64_t num_classes) {
  const auto example_size = static_cast<int64_t>(example_size_of(images.dims));
  Dataset dataset;
  dataset.size = end - begin;
  dataset.example_size = example_size;
  dataset.num_classes = num_classes;
  dataset.images.resize(dataset.size * example_size);
  const uint8_t* pixels = images.data.data() + begin * example_size;
  // Division rather than multiplication by 1/255 matches PyTorch's ToTensor bit for bit.
  std::transform(pixels, pixels + dataset.images.size(), dataset.images.begin(),
                 [](uint8_t x) { return static_cast<float>(x) / 255.0f; });
  dataset.labels.assign(labels.data.begin() + begin, labels.data.begin() + end);
  return dataset;
}

// dir/name if present, else dir/name.gz if present; a DataError naming both otherwise.
std::filesystem::path find_file(const std::filesystem::path& dir, const std::string& name) {
  const std::filesystem::path raw = dir / name;
  std::filesystem::path gz = raw;
  gz += ".gz";
  std::error_code ec;
  if (std::filesystem::exists(raw, ec)) return raw;
  if (std::filesystem::exists(gz, ec)) return gz;
  throw DataError(
      fmt::format("{}: no such file (nor {}); run scripts/fetch_mnist.sh {} to download "
                  "MNIST",
                  raw.string(), gz.filename().string(), dir.string()));
}

}  // namespace

std::filesystem::path find_mnist_file(const std::filesystem::path& dir, const std::string& name) {
  return find_file(dir, name);
}

namespace {

struct IdxPair {
  IdxArray images, labels;
  std::string images_name, labels_name;
};

// Each element is held as its byte and then as a float32 feature or an int32 label.
constexpr int64_t kHeldBytesPerElement = 1 + 4;

IdxPair read_pair(const std::filesystem::path& images_path,
                  const std::filesystem::path& labels_path) {
  return IdxPair{read_idx(images_path, kHeldBytesPerElement),
                 read_idx(labels_path, kHeldBytesPerElement), images_path.string(),
                 labels_path.string()};
}

}  // namespace

Dataset make_dataset(const IdxArray& images, const IdxArray& labels, const std::string& images_name,
                     const std::string& labels_name) {
  const int64_t count = validate_pair(images, labels, images_name, labels_name);
  const auto largest = std::max_element(labels.data.begin(), labels.data.end());
  const int64_t num_classes = largest == labels.data.end() ? 0 : int64_t{*largest} + 1;
  return convert_rows(images, labels, 0, count, num_classes);
}

MnistData load_mnist(const std::filesystem::path& dir, int64_t validation_size) {
  if (validation_size < 0) {
    throw UsageError(fmt::format("--validation_size {}: must be at least 0", validation_size));
  }
  // Find all four files before reading any, so a missing one is reported at once.
  const std::filesystem::path train_images = find_file(dir, "train-images-idx3-ubyte");
  const std::filesystem::path train_labels = find_file(dir, "train-labels-idx1-ubyte");
  const std::filesystem::path test_images = find_file(dir, "t10k-images-idx3-ubyte");
  const std::filesystem::path test_labels = find_file(dir, "t10k-labels-idx1-ubyte");

  MnistData mnist;
  {
    const IdxPair train = read_pair(train_images, train_labels);
    const int64_t count =
        validate_pair(train.images, train.labels, train.images_name, train.labels_name);
    validate_mnist_shape(train.images, train.labels, train.images_name, train.labels_name);
    if (validation_size >= count) {
      throw UsageError(
          fmt::format("--validation_size {}: must be less than the {} training examples in {}",
                      validation_size, count, train.images_name));
    }
    mnist.validation = convert_rows(train.images, train.labels, 0, validation_size, kMnistClasses);
    mnist.train = convert_rows(train.images, train.labels, validation_size, count, kMnistClasses);
    mnist.train.notes.label_source = mnist.validation.notes.label_source =
        "the IDX file " + train_labels.filename().string();
  }
  const IdxPair test = read_pair(test_images, test_labels);
  const int64_t test_count =
      validate_pair(test.images, test.labels, test.images_name, test.labels_name);
  validate_mnist_shape(test.images, test.labels, test.images_name, test.labels_name);
  mnist.test = convert_rows(test.images, test.labels, 0, test_count, kMnistClasses);
  mnist.test.notes.label_source = "the IDX file " + test_labels.filename().string();
  return mnist;
}

int64_t first_label_outside(const Dataset& data, int64_t classes) {
  for (size_t r = 0; r < data.labels.size(); ++r) {
    if (data.labels[r] < 0 || data.labels[r] >= classes) return static_cast<int64_t>(r);
  }
  return -1;
}

std::optional<FeaturePosition> first_nonfinite_feature(std::span<const float> rows, int64_t width) {
  // A whole pass without a branch per value, then the search only where one was found.
  bool finite = true;
  for (const float v : rows) finite &= std::isfinite(v);
  if (finite) return std::nullopt;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (std::isfinite(rows[i])) continue;
    const auto at = static_cast<int64_t>(i);
    return FeaturePosition{at / width, at % width, rows[i]};
  }
  return std::nullopt;
}

}  // namespace dtrain
