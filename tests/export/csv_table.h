// The CSV that `dtrain predict` and tests/export/onnx_run.js write, read back by column name for
// the export and predict tests.
#pragma once

#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtrain::testing {

struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<double>> rows;

  size_t column(const std::string& name) const {
    for (size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return i;
    throw std::runtime_error("no column " + name);
  }
  double at(size_t row, const std::string& name) const { return rows.at(row).at(column(name)); }
};

inline std::vector<std::string> split_commas(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream in(line);
  for (std::string field; std::getline(in, field, ',');) fields.push_back(field);
  return fields;
}

// A header line, then rows of numbers, all of the header's width (throws otherwise).
inline CsvTable parse_csv_table(const std::string& text) {
  std::stringstream in(text);
  CsvTable table;
  std::string line;
  if (!std::getline(in, line)) throw std::runtime_error("empty CSV");
  table.header = split_commas(line);
  while (std::getline(in, line)) {
    std::vector<double> row;
    for (const std::string& field : split_commas(line)) row.push_back(std::stod(field));
    if (row.size() != table.header.size()) throw std::runtime_error("ragged CSV row: " + line);
    table.rows.push_back(std::move(row));
  }
  return table;
}

inline CsvTable read_csv_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_csv_table(text.str());
}

}  // namespace dtrain::testing
