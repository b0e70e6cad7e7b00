// The data flags' declarations and what was given of them.
#include "plan/data_flags.h"

#include <map>
#include <string>

namespace dtrain {
namespace {

std::string default_note(const std::string& defaults_from) {
  return defaults_from.empty() ? "" : " (default: " + defaults_from + ")";
}

}  // namespace

void add_data_option_flags(CLI::App* cmd, DataOptions* options, const std::string& defaults_from) {
  cmd->add_option("--data_format", options->format,
                  "idx | tfrecord | csv (default: from each file's extension)")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, DataFormat>{{"auto", DataFormat::kAuto},
                                            {"idx", DataFormat::kIdx},
                                            {"tfrecord", DataFormat::kTfRecord},
                                            {"csv", DataFormat::kCsv}},
          CLI::ignore_case));
  cmd->add_option("--compression", options->compression,
                  "none | gzip | zlib (default: from .gz / .zlib, else none)")
      ->transform(
          CLI::CheckedTransformer(std::map<std::string, Compression>{{"auto", Compression::kAuto},
                                                                     {"none", Compression::kNone},
                                                                     {"gzip", Compression::kGzip},
                                                                     {"zlib", Compression::kZlib}},
                                  CLI::ignore_case));
  CLI::Option* image = cmd->add_option(
      "--image_feature", options->image_feature,
      "TFRecord: the tf.train.Example feature holding the input (bytes of uint8 pixels, scaled to "
      "[0, 1], or a float_list)" +
          default_note(defaults_from));
  CLI::Option* label = cmd->add_option(
      "--label_feature", options->label_feature,
      "TFRecord: the int64 feature holding the class" + default_note(defaults_from));
  if (defaults_from.empty()) {
    image->capture_default_str();
    label->capture_default_str();
  }
  cmd->add_option("--label_column", options->label_column,
                  "CSV: the label's column, by header name or 0-based index, or none (predict: "
                  "input without labels); default: the column named label, class, target or y "
                  "(any case), else the last" +
                      default_note(defaults_from));
  cmd->add_option_function<std::string>(
         "--feature_scale",
         [options](const std::string& text) {
           options->feature_scale = parse_feature_scale(text);
           if (!options->feature_scale) {
             throw CLI::ValidationError(
                 "--feature_scale",
                 "'" + text +
                     "' is not a scale; give a positive number or a fraction, as in "
                     "1/255 or 0.5");
           }
         },
         "CSV and TFRecord float_list: multiply every feature by this, a number or a fraction "
         "(1/255 for 0-255 pixels); uint8 pixels are always / 255 (default: features as given" +
             (defaults_from.empty() ? std::string(")") : "; " + defaults_from + ")"))
      ->type_name("SCALE");
}

DataOptions given_data_options(const CLI::App& cmd, const DataOptions& flags, DataOptions base) {
  auto given = [&](const char* name) { return cmd.count(name) > 0; };
  if (given("--data_format")) base.format = flags.format;
  if (given("--compression")) base.compression = flags.compression;
  if (given("--image_feature")) base.image_feature = flags.image_feature;
  if (given("--label_feature")) base.label_feature = flags.label_feature;
  if (given("--label_column")) base.label_column = flags.label_column;
  if (given("--feature_scale")) base.feature_scale = flags.feature_scale;
  return base;
}

}  // namespace dtrain
