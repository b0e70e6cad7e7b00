// CsvExampleReader: lines cut from blocks of InputFile, split into fields, the first row looked at
// for a header, then each row parsed with std::from_chars (no locale, no allocation per number).
#include "data/csv_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/error.h"
#include "data/example_files.h"

namespace dtrain {
namespace {

constexpr size_t kBlockBytes = size_t{1} << 16;
// A line longer than this is not a row of features but a file without line ends.
constexpr size_t kMaxLineBytes = size_t{64} << 20;

std::string_view trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(" \t") - begin + 1);
}

bool parse_number(std::string_view text, double& value) {
  text = trim(text);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size();
}

bool is_index(std::string_view text) {
  return !text.empty() && text.size() < 10 &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A field as errors quote it: at most 40 characters.
std::string shown(std::string_view text) {
  if (text.size() <= 40) return fmt::format("'{}'", text);
  return fmt::format("'{}...'", text.substr(0, 40));
}

}  // namespace

bool split_csv_line(std::string_view line, std::vector<std::string>& fields, size_t& error_column) {
  fields.clear();
  size_t i = 0;
  const size_t n = line.size();
  for (;;) {
    std::string field;
    if (i < n && line[i] == '"') {
      // A quoted field runs to the next lone quote; "" inside it stands for one quote.
      ++i;
      for (;;) {
        if (i >= n) {
          error_column = fields.size();
          return false;
        }
        if (line[i] == '"') {
          if (i + 1 < n && line[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field += line[i++];
      }
      if (i < n && line[i] != ',') {
        error_column = fields.size();
        return false;
      }
    } else {
      const size_t end = std::min(line.find(',', i), n);
      field.assign(line.substr(i, end - i));
      i = end;
    }
    fields.push_back(std::move(field));
    if (i >= n) return true;
    ++i;  // the comma
  }
}

CsvExampleReader::CsvExampleReader(const std::filesystem::path& path, const DataOptions& options)
    : file_(path, compression_of(path, options.compression)),
      buffer_(kBlockBytes),
      feature_scale_(options.feature_scale) {
  if (!next_row()) {
    throw DataError(fmt::format("{}: is empty: no header and no rows", path.string()));
  }
  field_count_ = row_.size();
  double ignored = 0;
  const bool header = std::any_of(row_.begin(), row_.end(),
                                  [&](const std::string& f) { return !parse_number(f, ignored); });
  if (header) header_ = row_;
  choose_label_column(options);
  if (label_column_ && field_count_ < 2) {
    throw DataError(
        fmt::format("{}:{}: has {} column; a row needs at least one feature and a "
                    "label",
                    path.string(), line_number_, field_count_));
  }
  row_pending_ = header ? next_row() : true;
}

std::optional<size_t> CsvExampleReader::label_named_by_header() const {
  // In this order, so that "x,y,label" takes "label": a coordinate named y is common, a second
  // column named label is not.
  for (std::string_view wanted : {"label", "class", "target", "y"}) {
    std::vector<size_t> named;
    for (size_t column = 0; column < header_.size(); ++column) {
      std::string name(trim(header_[column]));
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (name == wanted) named.push_back(column);
    }
    if (named.size() > 1) {
      throw UsageError(fmt::format(
          "{}: {} and {} are both named '{}', a label's name; say which with --label_column",
          file_.path().string(), column_name(named[0]), column_name(named[1]), wanted));
    }
    if (!named.empty()) return named.front();
  }
  return std::nullopt;
}

void CsvExampleReader::choose_label_column(const DataOptions& options) {
  const std::string& label_column = options.label_column;
  if (label_column == kNoLabelColumn) {
    label_choice_ = "by --label_column none";
    return;
  }
  if (label_column.empty()) {
    if (const std::optional<size_t> named = label_named_by_header()) {
      label_column_ = *named;
      label_choice_ = fmt::format("by its header name '{}'", header_[*named]);
    } else if (options.unlabelled_width > 0 &&
               field_count_ <= static_cast<size_t>(options.unlabelled_width)) {
      label_choice_ = fmt::format("its rows have {} fields, no more than the model's {} features",
                                  field_count_, options.unlabelled_width);
    } else {
      label_column_ = field_count_ - 1;
      label_choice_ = "the last column, by default";
    }
    return;
  }
  const auto named = std::find(header_.begin(), header_.end(), label_column);
  if (named != header_.end()) {
    label_column_ = static_cast<size_t>(named - header_.begin());
    label_choice_ = fmt::format("by --label_column {}", label_column);
    return;
  }
  if (is_index(label_column)) {
    label_column_ = std::stoul(label_column);
    label_choice_ = fmt::format("by --label_column {}", label_column);
    if (*label_column_ < field_count_) return;
    throw UsageError(
        fmt::format("{}: --label_column {} is out of range: the file has {} columns "
                    "(0 to {})",
                    file_.path().string(), label_column, field_count_, field_count_ - 1));
  }
  throw UsageError(fmt::format(
      "{}: --label_column '{}' names no column ({})", file_.path().string(), label_column,
      header_.empty() ? std::string("the file has no header row; give a 0-based index")
                      : fmt::format("the header has: {}", fmt::join(header_, ", "))));
}

std::string CsvExampleReader::column_name(size_t column) const {
  if (column < header_.size()) return fmt::format("column {} ({})", column, shown(header_[column]));
  return fmt::format("column {}", column);
}

std::string CsvExampleReader::label_source() const {
  if (!label_column_) return fmt::format("none, {}", label_choice_);
  return fmt::format("{}, {}", column_name(*label_column_), label_choice_);
}

std::string CsvExampleReader::feature_name(int64_t i) const {
  const size_t index = static_cast<size_t>(i);
  return column_name(label_column_ && index >= *label_column_ ? index + 1 : index);
}

bool CsvExampleReader::next_line(std::string& line) {
  for (;;) {
    line.clear();
    bool ended = false;
    while (!ended) {
      const char* begin = buffer_.data() + buffer_start_;
      const size_t held = buffer_end_ - buffer_start_;
      const char* newline = static_cast<const char*>(std::memchr(begin, '\n', held));
      const size_t take = newline != nullptr ? static_cast<size_t>(newline - begin) : held;
      line.append(begin, take);
      if (line.size() > kMaxLineBytes) {
        throw DataError(fmt::format("{}:{}: line is longer than {} bytes", file_.path().string(),
                                    line_number_ + 1, kMaxLineBytes));
      }
      if (newline != nullptr) {
        buffer_start_ += take + 1;
        break;
      }
      buffer_start_ = buffer_end_ = 0;
      const size_t got = file_.read(std::as_writable_bytes(std::span(buffer_)));
      if (got == 0) {
        if (line.empty()) return false;
        ended = true;  // a last line without a line end
      }
      buffer_end_ = got;
    }
    ++line_number_;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!trim(line).empty()) return true;
  }
}

bool CsvExampleReader::next_row() {
  std::string line;
  if (!next_line(line)) return false;
  size_t column = 0;
  if (!split_csv_line(line, row_, column)) {
    fail_at(column, "a quote is left open, or text follows a closing quote");
  }
  return true;
}

bool CsvExampleReader::next(std::span<float> features, int32_t& label) {
  if (row_pending_) {
    row_pending_ = false;
  } else if (!next_row()) {
    return false;
  }
  decode_row(features, label);
  return true;
}

void CsvExampleReader::decode_row(std::span<float> features, int32_t& label) const {
  if (row_.size() != field_count_) {
    throw DataError(fmt::format("{}: has {} fields; expected {}, as the first row has", position(),
                                row_.size(), field_count_));
  }
  size_t feature = 0;
  for (size_t column = 0; column < row_.size(); ++column) {
    double value = 0;
    const bool number = parse_number(row_[column], value);
    if (column == label_column_) {
      if (!number || value < 0 || value > std::numeric_limits<int32_t>::max() ||
          value != std::floor(value)) {
        fail_at(column,
                fmt::format("label {} is not a non-negative integer (the label column here, {}; "
                            "name another with --label_column, or none for data without labels)",
                            shown(row_[column]), label_choice_));
      }
      label = static_cast<int32_t>(value);
      continue;
    }
    float as_float = static_cast<float>(value);
    if (!number || !std::isfinite(as_float)) {
      fail_at(column, fmt::format("{} is not a finite number", shown(row_[column])));
    }
    if (feature_scale_) {
      as_float = feature_scale_->apply(as_float);
      if (!std::isfinite(as_float)) {
        fail_at(column, fmt::format("{} times --feature_scale {} is not a finite float",
                                    shown(row_[column]), feature_scale_->text));
      }
    }
    features[feature++] = as_float;
  }
  if (!label_column_) label = -1;
}

void CsvExampleReader::fail_at(size_t column, const std::string& problem) const {
  const std::string name =
      column < header_.size() ? fmt::format(" ({})", shown(header_[column])) : std::string();
  throw DataError(fmt::format("{}: column {}{}: {}", position(), column, name, problem));
}

std::string CsvExampleReader::position() const {
  return fmt::format("{}:{}", file_.path().string(), line_number_);
}

std::unique_ptr<ExampleReader> make_csv_example_reader(const std::filesystem::path& path,
                                                       const DataOptions& options) {
  return std::make_unique<CsvExampleReader>(path, options);
}

}  // namespace dtrain
