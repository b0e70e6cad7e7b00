#include "cli/csv_rows.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "base/error.h"

namespace dtrain::cli {

CsvRows::CsvRows(std::string path, const std::vector<std::string>& header)
    : path_(std::move(path)), columns_(header.size()) {
  const std::string header_line = fmt::format("{}", fmt::join(header, ","));
  std::string first_line;
  {
    std::ifstream existing(path_);
    std::getline(existing, first_line);
  }
  if (!first_line.empty() && first_line != header_line) {
    throw IoError(fmt::format("--csv {}: holds other columns ({}); this benchmark writes {}", path_,
                              first_line, header_line));
  }
  out_.open(path_, std::ios::app);
  if (!out_) {
    throw IoError(fmt::format("--csv {}: cannot open to append: {}", path_, std::strerror(errno)));
  }
  if (first_line.empty()) out_ << header_line << '\n' << std::flush;
}

void CsvRows::add(const std::vector<std::string>& fields) {
  if (fields.size() != columns_) {
    throw std::logic_error(
        fmt::format("CsvRows: {} fields for {} columns in {}", fields.size(), columns_, path_));
  }
  out_ << fmt::format("{}", fmt::join(fields, ",")) << '\n' << std::flush;
  if (!out_) throw IoError(fmt::format("--csv {}: write failed: {}", path_, std::strerror(errno)));
}

}  // namespace dtrain::cli
