// Rows a benchmark adds to a CSV file (--csv), for curves drawn across many runs: each run appends
// its rows, and a new or empty file gets the header first.
#pragma once

#include <fstream>
#include <string>
#include <vector>

namespace dtrain::cli {

class CsvRows {
 public:
  // Opens `path` to append. Throws IoError naming it if it cannot, or if the file already starts
  // with another header (rows of another benchmark).
  CsvRows(std::string path, const std::vector<std::string>& header);

  // Appends one row and flushes it, so that an interrupted sweep keeps what it measured. The
  // fields are numbers and names without commas or quotes. Throws IoError naming the file.
  void add(const std::vector<std::string>& fields);

 private:
  std::string path_;
  size_t columns_;
  std::ofstream out_;
};

}  // namespace dtrain::cli
