// Paths to readers to memory: glob(3) for the patterns, file names for pairing IDX files, and one
// growing buffer per Dataset, sized once from the readers' counts when known.
#include "data/data_files.h"

#include <fmt/format.h>
#include <glob.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <string_view>

#include "base/checked_math.h"
#include "base/error.h"
#include "base/machine_memory.h"
#include "data/example_files.h"
#include "data/idx_example_reader.h"

namespace dtrain {
namespace {

bool has_wildcard(std::string_view pattern) {
  return pattern.find_first_of("*?[") != std::string_view::npos;
}

std::string trimmed(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return "";
  const size_t last = text.find_last_not_of(" \t");
  return std::string(text.substr(first, last - first + 1));
}

// The matches of one item of the list, sorted.
// REQUIRES: item is not empty.
std::vector<std::filesystem::path> expand_item(const std::string& item) {
  if (!has_wildcard(item)) {
    std::error_code ec;
    if (!std::filesystem::exists(item, ec)) throw DataError(fmt::format("{}: no such file", item));
    return {std::filesystem::path(item)};
  }
  glob_t matches{};
  const int result = ::glob(item.c_str(), 0, nullptr, &matches);
  std::vector<std::filesystem::path> paths;
  if (result == 0) paths.assign(matches.gl_pathv, matches.gl_pathv + matches.gl_pathc);
  ::globfree(&matches);
  if (result == GLOB_NOMATCH) {
    throw UsageError(fmt::format("data path pattern '{}' matches no file", item));
  }
  if (result != 0) {
    throw UsageError(fmt::format("data path pattern '{}': glob failed (code {})", item, result));
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

// The file name without a ".gz" / ".zlib" suffix, and the suffix.
std::pair<std::string, std::string> split_compression_suffix(const std::string& name) {
  for (std::string_view suffix : {".gz", ".zlib"}) {
    if (name.size() > suffix.size() && name.ends_with(suffix)) {
      return {name.substr(0, name.size() - suffix.size()), std::string(suffix)};
    }
  }
  return {name, ""};
}

// name with its last `from` replaced by `to` and the "idx<digit>" after it by `idx`; empty if
// name has no `from` or no "idx<digit>" after it.
std::string swap_kind(const std::string& name, std::string_view from, std::string_view to,
                      std::string_view idx) {
  const size_t at = name.rfind(from);
  if (at == std::string::npos) return "";
  std::string swapped = name;
  swapped.replace(at, from.size(), to);
  for (size_t i = swapped.find("idx", at); i != std::string::npos; i = swapped.find("idx", i + 1)) {
    if (i + 3 < swapped.size() && std::isdigit(static_cast<unsigned char>(swapped[i + 3]))) {
      swapped.replace(i, 4, idx);
      return swapped;
    }
  }
  return "";
}

// The first of names (in dir, with suffix or with ".gz" toggled) that exists; empty if none.
std::filesystem::path first_existing(const std::filesystem::path& dir,
                                     const std::vector<std::string>& names,
                                     const std::string& suffix) {
  std::error_code ec;
  for (const std::string& name : names) {
    for (const std::string& ending : {suffix, std::string(suffix == ".gz" ? "" : ".gz")}) {
      const std::filesystem::path candidate = dir / (name + ending);
      if (std::filesystem::exists(candidate, ec)) return candidate;
    }
  }
  return {};
}

}  // namespace

std::vector<std::filesystem::path> expand_data_paths(const std::string& list) {
  // The whole list is checked before any item is expanded, so a typo in its syntax is reported as
  // such and not as the file an earlier item misses.
  std::vector<std::string> items;
  for (size_t begin = 0;;) {
    const size_t comma = list.find(',', begin);
    items.push_back(trimmed(std::string_view(list).substr(
        begin, comma == std::string::npos ? std::string::npos : comma - begin)));
    if (items.back().empty()) {
      throw UsageError(fmt::format("data paths '{}': an empty item", list));
    }
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  std::vector<std::filesystem::path> paths;
  std::set<std::filesystem::path> seen;
  for (const std::string& item : items) {
    for (std::filesystem::path& path : expand_item(item)) {
      if (seen.insert(path).second) paths.push_back(std::move(path));
    }
  }
  return paths;
}

IdxFilePair idx_pair_of(const std::filesystem::path& path) {
  const auto [name, suffix] = split_compression_suffix(path.filename().string());
  const std::filesystem::path dir = path.parent_path();
  const size_t images_at = name.rfind("images");
  const size_t labels_at = name.rfind("labels");
  const bool is_images =
      images_at != std::string::npos && (labels_at == std::string::npos || images_at > labels_at);
  std::vector<std::string> partners;
  if (is_images) {
    partners = {swap_kind(name, "images", "labels", "idx1")};
  } else if (labels_at != std::string::npos) {
    for (std::string_view idx : {"idx3", "idx4", "idx2"}) {
      partners.push_back(swap_kind(name, "labels", "images", idx));
    }
  }
  std::erase(partners, std::string());
  if (partners.empty()) {
    throw UsageError(fmt::format(
        "{}: cannot find the other file of its IDX pair: image and label files are paired by "
        "name, as in train-images-idx3-ubyte and train-labels-idx1-ubyte",
        path.string()));
  }
  const std::filesystem::path partner = first_existing(dir, partners, suffix);
  if (partner.empty()) {
    throw DataError(fmt::format("{}: no such file, the {} file of the IDX pair of {}",
                                (dir / (partners.front() + suffix)).string(),
                                is_images ? "label" : "image", path.string()));
  }
  return is_images ? IdxFilePair{path, partner} : IdxFilePair{partner, path};
}

std::unique_ptr<ExampleReader> open_example_reader(const std::filesystem::path& path,
                                                   const DataOptions& options) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw DataError(fmt::format("{}: no such file", path.string()));
  }
  switch (format_of(path, options.format)) {
    case DataFormat::kIdx: {
      const IdxFilePair pair = idx_pair_of(path);
      return std::make_unique<IdxExampleReader>(pair.images, pair.labels);
    }
    case DataFormat::kTfRecord:
      return make_tfrecord_example_reader(path, options);
    case DataFormat::kCsv:
      return make_csv_example_reader(path, options);
    case DataFormat::kAuto:
      break;
  }
  throw UsageError(fmt::format("{}: no reader for its data format", path.string()));
}

namespace {

// Refuses, before they are allocated, examples whose features would need more than this machine's
// memory: a header's count (IDX) is checked at open, any other file row by row as it grows.
void require_features_fit(const std::filesystem::path& path, int64_t examples, int64_t features) {
  const int64_t bytes = saturating_mul(saturating_mul(examples, features), sizeof(float));
  const AllocationLimit limit = allocation_limit();
  if (static_cast<uint64_t>(bytes) <= limit.bytes) return;
  throw TooLargeError(fmt::format("{}: {} examples of {} float32 features need {}, more than {}",
                                  path.string(), examples, features,
                                  format_bytes(static_cast<uint64_t>(bytes)), limit.text));
}

}  // namespace

namespace {

// The smallest and largest feature values of a file, and the feature furthest from 0, gathered
// row by row as the rows are read: the warning about unscaled large features costs no extra pass.
struct FeatureRange {
  float min = 0, max = 0, extreme = 0;
  int64_t extreme_feature = -1;

  void add(std::span<const float> row) {
    for (size_t i = 0; i < row.size(); ++i) {
      const float x = row[i];
      min = std::min(min, x);
      max = std::max(max, x);
      if (std::abs(x) > std::abs(extreme)) {
        extreme = x;
        extreme_feature = static_cast<int64_t>(i);
      }
    }
  }
};

std::string large_features_warning(const std::filesystem::path& path, const FeatureRange& range,
                                   const ExampleReader& reader) {
  return fmt::format(
      "warning: {}: features span {:g} to {:g} ({} holds {:g}) and no --feature_scale is given; "
      "values beyond ±{:g} saturate the model's softmax: give --feature_scale (1/255 for 0-255 "
      "pixels)",
      path.string(), range.min, range.max, reader.feature_name(range.extreme_feature),
      range.extreme, kLargeFeature);
}

}  // namespace

Dataset load_examples(const std::vector<std::filesystem::path>& paths, const DataOptions& options) {
  Dataset data;
  data.size = 0;
  data.num_classes = 0;
  std::filesystem::path first_path;
  std::set<std::filesystem::path> idx_images_read;
  for (const std::filesystem::path& path : paths) {
    if (format_of(path, options.format) == DataFormat::kIdx &&
        !idx_images_read.insert(idx_pair_of(path).images).second) {
      continue;  // the other file of a pair already read
    }
    const std::unique_ptr<ExampleReader> reader = open_example_reader(path, options);
    const int64_t features = reader->feature_count();
    if (first_path.empty()) {
      first_path = path;
      data.example_size = features;
      data.notes.pixels = reader->pixels();
      data.notes.labelled = reader->labelled();
      data.notes.label_source = reader->label_source();
      data.notes.label_is_chosen_column = reader->label_is_chosen_column();
    } else if (features != data.example_size) {
      throw DataError(fmt::format("{} has {} features per example but {} has {}",
                                  first_path.string(), data.example_size, path.string(), features));
    } else if (reader->labelled() != data.notes.labelled) {
      throw DataError(fmt::format("{} has {} but {} has {}", first_path.string(),
                                  data.notes.labelled ? "labels" : "no labels", path.string(),
                                  reader->labelled() ? "labels" : "none"));
    }
    data.notes.pixels = data.notes.pixels || reader->pixels();
    if (const std::optional<int64_t> count = reader->example_count()) {
      require_features_fit(path, saturating_add(data.size, *count), features);
      const size_t needed = static_cast<size_t>((data.size + *count) * features);
      if (needed > data.images.capacity()) {
        data.images.reserve(std::max(needed, 2 * data.images.capacity()));
      }
      data.labels.reserve(data.size + *count);
    }
    const bool watch_range = !reader->pixels() && !options.feature_scale;
    FeatureRange range;
    int32_t label = 0;
    for (;;) {
      require_features_fit(path, data.size + 1, features);
      data.images.resize(static_cast<size_t>((data.size + 1) * features));
      const std::span<float> row(data.images.data() + data.size * features,
                                 static_cast<size_t>(features));
      if (!reader->next(row, label)) break;
      if (watch_range) range.add(row);
      if (!reader->labelled()) {
        label = -1;
      } else if (label < 0) {
        throw DataError(fmt::format("{}: label {} is negative", reader->position(), label));
      }
      data.labels.push_back(label);
      data.num_classes = std::max<int64_t>(data.num_classes, int64_t{label} + 1);
      ++data.size;
    }
    data.images.resize(static_cast<size_t>(data.size * features));
    if (std::abs(range.extreme) > kLargeFeature && data.notes.warnings.empty()) {
      data.notes.warnings.push_back(large_features_warning(path, range, *reader));
    }
  }
  return data;
}

std::string absolute_data_paths(const std::string& list) {
  std::string absolute;
  for (size_t begin = 0;;) {
    const size_t comma = list.find(',', begin);
    const std::string item = trimmed(std::string_view(list).substr(
        begin, comma == std::string::npos ? std::string::npos : comma - begin));
    if (!absolute.empty()) absolute += ',';
    if (!item.empty()) absolute += std::filesystem::absolute(item).lexically_normal().string();
    if (comma == std::string::npos) return absolute;
    begin = comma + 1;
  }
}

}  // namespace dtrain
