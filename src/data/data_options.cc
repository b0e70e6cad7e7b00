// Data options to and from the JSON a checkpoint keeps.
#include "data/data_options.h"

#include <fmt/format.h>

#include <array>
#include <utility>

#include "base/error.h"

namespace dtrain {
namespace {

constexpr std::array<std::pair<DataFormat, const char*>, 4> kFormats = {{
    {DataFormat::kAuto, "auto"},
    {DataFormat::kIdx, "idx"},
    {DataFormat::kTfRecord, "tfrecord"},
    {DataFormat::kCsv, "csv"},
}};
constexpr std::array<std::pair<Compression, const char*>, 4> kCompressions = {{
    {Compression::kAuto, "auto"},
    {Compression::kNone, "none"},
    {Compression::kGzip, "gzip"},
    {Compression::kZlib, "zlib"},
}};

template <typename Enum, size_t N>
const char* name_of(const std::array<std::pair<Enum, const char*>, N>& names, Enum value) {
  for (const auto& [e, name] : names)
    if (e == value) return name;
  return "auto";
}

template <typename Enum, size_t N>
Enum value_of(const std::array<std::pair<Enum, const char*>, N>& names, const std::string& name,
              const char* what) {
  for (const auto& [e, known] : names)
    if (name == known) return e;
  throw DataError(fmt::format("the checkpoint's {} '{}' is not one dtrain knows", what, name));
}

}  // namespace

const char* format_name(DataFormat format) { return name_of(kFormats, format); }
const char* compression_name(Compression compression) {
  return name_of(kCompressions, compression);
}

nlohmann::json data_options_json(const DataOptions& o) {
  nlohmann::json json = {{"data_format", format_name(o.format)},
                         {"compression", compression_name(o.compression)},
                         {"image_feature", o.image_feature},
                         {"label_feature", o.label_feature},
                         {"label_column", o.label_column}};
  // As given ("1/255"), so that it reads back to the same bits; absent when none was given.
  if (o.feature_scale) json["feature_scale"] = o.feature_scale->text;
  return json;
}

DataOptions data_options_from_json(const nlohmann::json& json) {
  DataOptions o;
  if (!json.is_object()) return o;
  o.format = value_of(kFormats, json.value("data_format", std::string("auto")), "data format");
  o.compression =
      value_of(kCompressions, json.value("compression", std::string("auto")), "compression");
  o.image_feature = json.value("image_feature", o.image_feature);
  o.label_feature = json.value("label_feature", o.label_feature);
  o.label_column = json.value("label_column", o.label_column);
  if (json.contains("feature_scale")) {
    const nlohmann::json& scale = json["feature_scale"];
    std::optional<FeatureScale> parsed;
    if (scale.is_string()) parsed = parse_feature_scale(scale.get<std::string>());
    if (!parsed) {
      throw DataError(fmt::format("the checkpoint's feature scale {} is not a scale dtrain reads",
                                  scale.dump()));
    }
    o.feature_scale = std::move(parsed);
  }
  return o;
}

}  // namespace dtrain
