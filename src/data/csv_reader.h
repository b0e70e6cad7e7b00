// CSV files of examples: numeric feature columns and one integer label column, read through
// InputFile (so ".csv.gz" works) a line at a time. Rules, chosen to read what pandas and
// spreadsheets write:
//   - fields are separated by commas and may be wrapped in double quotes (a quote inside a quoted
//     field is doubled); a quoted field does not span lines;
//   - CRLF line ends are accepted; blank lines are skipped;
//   - the first row is a header when one of its fields is not a number;
//   - the label column is DataOptions::label_column: a header name or a 0-based index; else the
//     column whose header is label, class, target or y (any case); else, for prediction, none
//     when a row has no more fields than the model's features (DataOptions::unlabelled_width);
//     else the last column. "none" says there is none. Labels are non-negative integers ("3" or
//     "3.0"), and a label that is not names the column and how it was chosen;
//   - features are multiplied by DataOptions::feature_scale when one is given;
//   - every row has the first row's number of fields; features are finite numbers.
// Columns are named 0-based in errors, as --label_column counts them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/data_options.h"
#include "data/example_reader.h"
#include "data/input_file.h"

namespace dtrain {

// Splits one line (without its line end) into fields, removing the quotes of quoted fields.
// Returns false, leaving the fields so far, when a quote is left open or text follows a closing
// quote; `error_column` is then the 0-based column at fault.
bool split_csv_line(std::string_view line, std::vector<std::string>& fields, size_t& error_column);

class CsvExampleReader : public ExampleReader {
 public:
  // Opens path and reads up to its first data row, to know the columns. Throws DataError for an
  // empty file or a malformed first row, UsageError when options.label_column names no column or
  // two header names both say "label".
  CsvExampleReader(const std::filesystem::path& path, const DataOptions& options);

  int64_t feature_count() const override {
    return static_cast<int64_t>(field_count_) - (label_column_ ? 1 : 0);
  }
  bool next(std::span<float> features, int32_t& label) override;
  // "train.csv:17": the line of the row last returned (or read).
  std::string position() const override;
  bool pixels() const override { return false; }
  bool labelled() const override { return label_column_.has_value(); }
  // "column 0 ('label'), by its header name 'label'", "none, by --label_column none".
  std::string label_source() const override;
  bool label_is_chosen_column() const override { return label_column_.has_value(); }
  std::string feature_name(int64_t i) const override;

  // Whether the file's first row was taken as a header, and the label's column (none: features
  // only).
  bool has_header() const { return !header_.empty(); }
  std::optional<size_t> label_column() const { return label_column_; }

 private:
  bool next_line(std::string& line);  // the next non-blank line, without its line end
  bool next_row();                    // splits the next line into row_; false at the end
  void choose_label_column(const DataOptions& options);
  std::optional<size_t> label_named_by_header() const;
  std::string column_name(size_t column) const;  // "column 3 ('f3')"
  void decode_row(std::span<float> features, int32_t& label) const;
  [[noreturn]] void fail_at(size_t column, const std::string& problem) const;

  InputFile file_;
  std::vector<char> buffer_;  // bytes read from file_ and not yet handed out as lines
  size_t buffer_start_ = 0;
  size_t buffer_end_ = 0;
  uint64_t line_number_ = 0;  // of the line last read, 1-based
  std::vector<std::string> header_;
  std::vector<std::string> row_;
  bool row_pending_ = false;  // row_ holds the first data row, read by the constructor
  size_t field_count_ = 0;
  std::optional<size_t> label_column_;
  std::string label_choice_;  // how label_column_ was chosen: "by its header name 'label'"
  std::optional<FeatureScale> feature_scale_;
};

}  // namespace dtrain
