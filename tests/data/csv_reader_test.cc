// CsvExampleReader and split_csv_line: headers detected, the label column chosen by name, index
// or default, quotes, CRLF, blank lines and gzip handled; every malformed row named by file:line
// and column.
#include "data/csv_reader.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "data/example_files.h"
#include "support/temp_dir.h"

namespace dtrain {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempDir;
using ::testing::ThrowsMessage;
using testing::write_bytes;

struct Row {
  std::vector<float> features;
  int32_t label;
};

std::vector<Row> read_csv(const std::filesystem::path& path, const DataOptions& options = {}) {
  auto reader = make_csv_example_reader(path, options);
  std::vector<Row> rows;
  Row row{std::vector<float>(reader->feature_count()), -1};
  while (reader->next(row.features, row.label)) rows.push_back(row);
  return rows;
}

std::vector<std::string> split(std::string_view line) {
  std::vector<std::string> fields;
  size_t column = 0;
  EXPECT_TRUE(split_csv_line(line, fields, column)) << line;
  return fields;
}

TEST(CsvSplit, CommasQuotesAndDoubledQuotes) {
  EXPECT_THAT(split("1,2.5,x"), ElementsAre("1", "2.5", "x"));
  EXPECT_THAT(split("\"a,b\",\"say \"\"hi\"\"\",3"), ElementsAre("a,b", "say \"hi\"", "3"));
  EXPECT_THAT(split("1,,"), ElementsAre("1", "", ""));
  EXPECT_THAT(split(""), ElementsAre(""));
}

TEST(CsvSplit, AnOpenQuoteOrTextAfterAClosingQuoteNamesTheColumn) {
  std::vector<std::string> fields;
  size_t column = 99;
  EXPECT_FALSE(split_csv_line("1,\"open", fields, column));
  EXPECT_EQ(column, 1u);
  EXPECT_FALSE(split_csv_line("1,2,\"x\"y", fields, column));
  EXPECT_EQ(column, 2u);
}

TEST(CsvReader, WithoutAHeaderTheLastColumnIsTheLabel) {
  TempDir dir;
  write_bytes(dir / "a.csv", "0.5,1,3\n-2,1e3,0\n");
  const std::vector<Row> rows = read_csv(dir / "a.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_THAT(rows[0].features, ElementsAre(0.5f, 1.0f));
  EXPECT_EQ(rows[0].label, 3);
  EXPECT_THAT(rows[1].features, ElementsAre(-2.0f, 1000.0f));
  EXPECT_EQ(rows[1].label, 0);
}

TEST(CsvReader, AHeaderIsDetectedAndTheLabelChosenByName) {
  TempDir dir;
  write_bytes(dir / "h.csv", "label,p0,p1\n7,0.25,\"0.75\"\r\n2.0,1,2\r\n\r\n\n");
  DataOptions options;
  options.label_column = "label";
  CsvExampleReader reader(dir / "h.csv", options);
  EXPECT_TRUE(reader.has_header());
  EXPECT_EQ(reader.label_column(), 0u);
  ASSERT_EQ(reader.feature_count(), 2);
  std::vector<float> features(2);
  int32_t label = -1;
  ASSERT_TRUE(reader.next(features, label));
  EXPECT_THAT(features, ElementsAre(0.25f, 0.75f));
  EXPECT_EQ(label, 7);
  ASSERT_TRUE(reader.next(features, label));
  EXPECT_EQ(label, 2);
  EXPECT_EQ(reader.position(), (dir / "h.csv").string() + ":3");
  EXPECT_FALSE(reader.next(features, label));
}

TEST(CsvReader, WithoutTheFlagAHeaderNamedLabelClassTargetOrYIsTheLabelInAnyCase) {
  TempDir dir;
  for (const char* name : {"label", "Class", "TARGET", "y"}) {
    // Kaggle's layout: the label first, a feature last that the default would take.
    write_bytes(dir / "k.csv", fmt::format("{},pixel0,pixel1\n3,10,0\n1,20,0\n", name));
    CsvExampleReader reader(dir / "k.csv", DataOptions{});
    EXPECT_EQ(reader.label_column(), 0u) << name;
    EXPECT_EQ(reader.label_source(),
              fmt::format("column 0 ('{}'), by its header name '{}'", name, name));
    const std::vector<Row> rows = read_csv(dir / "k.csv");
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_THAT(rows[0].features, ElementsAre(10.0f, 0.0f));
    EXPECT_EQ(rows[0].label, 3);
  }
}

TEST(CsvReader, TwoHeaderNamesThatSayLabelAreRefusedNamingBoth) {
  TempDir dir;
  write_bytes(dir / "two.csv", "id,Label,f,LABEL\n0,1,2,3\n");
  EXPECT_THAT([&] { read_csv(dir / "two.csv"); },
              ThrowsMessage<UsageError>(AllOf(HasSubstr("two.csv"), HasSubstr("column 1 ('Label')"),
                                              HasSubstr("column 3 ('LABEL')"),
                                              HasSubstr("--label_column"))));
  DataOptions options;
  options.label_column = "3";  // the flag settles it
  EXPECT_EQ(read_csv(dir / "two.csv", options).at(0).label, 3);
}

// label before class before target before y: "x,y,label" is a point and its label.
TEST(CsvReader, OfSeveralLabelNamesTheMostSpecificIsTaken) {
  TempDir dir;
  write_bytes(dir / "xy.csv", "x,y,label\n0.5,0.25,1\n");
  EXPECT_EQ(read_csv(dir / "xy.csv").at(0).label, 1);
  write_bytes(dir / "ct.csv", "target,class,f\n2,1,0\n");
  EXPECT_EQ(read_csv(dir / "ct.csv").at(0).label, 1);
}

TEST(CsvReader, ANonIntegerLabelNamesTheColumnAndHowItWasChosen) {
  TempDir dir;
  write_bytes(dir / "f.csv", "a,b,c\n1,2,3\n1,2,-1.3631\n");
  EXPECT_THAT([&] { read_csv(dir / "f.csv"); },
              ThrowsMessage<DataError>(
                  AllOf(HasSubstr("f.csv:3: column 2 ('c')"), HasSubstr("'-1.3631'"),
                        HasSubstr("the last column, by default"), HasSubstr("--label_column"))));
  write_bytes(dir / "g.csv", "target,b\n0.5,2\n");
  EXPECT_THAT([&] { read_csv(dir / "g.csv"); },
              ThrowsMessage<DataError>(AllOf(HasSubstr("column 0 ('target')"),
                                             HasSubstr("by its header name 'target'"))));
  DataOptions options;
  options.label_column = "1";
  write_bytes(dir / "h.csv", "1,2.5,3\n");
  EXPECT_THAT(
      [&] { read_csv(dir / "h.csv", options); },
      ThrowsMessage<DataError>(AllOf(HasSubstr("column 1"), HasSubstr("by --label_column 1"))));
}

TEST(CsvReader, FeaturesAreMultipliedByTheFeatureScaleAndTheLabelIsNot) {
  TempDir dir;
  write_bytes(dir / "s.csv", "label,a,b\n7,255,51\n");
  DataOptions options;
  options.feature_scale = parse_feature_scale("1/255");
  const std::vector<Row> rows = read_csv(dir / "s.csv", options);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_THAT(rows[0].features, ElementsAre(1.0f, 51.0f / 255.0f));
  EXPECT_EQ(rows[0].label, 7);
  // A scale that overflows a float is named with the value.
  write_bytes(dir / "big.csv", "a,label\n3e38,1\n");
  options.feature_scale = parse_feature_scale("10");
  EXPECT_THAT([&] { read_csv(dir / "big.csv", options); },
              ThrowsMessage<DataError>(
                  AllOf(HasSubstr("big.csv:2: column 0 ('a')"), HasSubstr("--feature_scale 10"))));
}

TEST(CsvReader, WithoutALabelColumnEveryFieldIsAFeatureAndTheLabelIsMinusOne) {
  TempDir dir;
  write_bytes(dir / "u.csv", "0.5,1,3\n");
  DataOptions options;
  options.label_column = "none";
  CsvExampleReader reader(dir / "u.csv", options);
  EXPECT_FALSE(reader.labelled());
  EXPECT_FALSE(reader.label_column().has_value());
  ASSERT_EQ(reader.feature_count(), 3);
  std::vector<float> features(3);
  int32_t label = 0;
  ASSERT_TRUE(reader.next(features, label));
  EXPECT_THAT(features, ElementsAre(0.5f, 1.0f, 3.0f));
  EXPECT_EQ(label, -1);
  // A single column is a feature, not a row missing its label.
  write_bytes(dir / "one.csv", "0.25\n");
  EXPECT_EQ(read_csv(dir / "one.csv", options).at(0).features, std::vector<float>{0.25f});
}

TEST(CsvReader, ForPredictionRowsNoWiderThanTheModelsFeaturesHoldNoLabel) {
  TempDir dir;
  write_bytes(dir / "features.csv", "f0,f1,f2\n1,2,3\n");
  write_bytes(dir / "labelled.csv", "f0,f1,f2,f3\n1,2,3,4\n");
  DataOptions options;
  options.unlabelled_width = 3;
  CsvExampleReader features(dir / "features.csv", options);
  EXPECT_FALSE(features.labelled());
  EXPECT_EQ(features.feature_count(), 3);
  EXPECT_THAT(features.label_source(), HasSubstr("no more than the model's 3 features"));
  CsvExampleReader labelled(dir / "labelled.csv", options);
  EXPECT_TRUE(labelled.labelled());
  EXPECT_EQ(labelled.label_column(), 3u);
  EXPECT_EQ(labelled.feature_count(), 3);
}

TEST(CsvReader, FeaturesAreNamedByTheirColumnAroundTheLabel) {
  TempDir dir;
  write_bytes(dir / "n.csv", "a,label,c\n1,2,3\n");
  CsvExampleReader reader(dir / "n.csv", DataOptions{});
  EXPECT_EQ(reader.feature_name(0), "column 0 ('a')");
  EXPECT_EQ(reader.feature_name(1), "column 2 ('c')");
}

TEST(CsvReader, TheLabelChosenByIndex) {
  TempDir dir;
  write_bytes(dir / "i.csv", "1,4,2\n");
  DataOptions options;
  options.label_column = "1";
  const std::vector<Row> rows = read_csv(dir / "i.csv", options);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_THAT(rows[0].features, ElementsAre(1.0f, 2.0f));
  EXPECT_EQ(rows[0].label, 4);
}

TEST(CsvReader, ALabelColumnThatNamesNothingIsAUsageError) {
  TempDir dir;
  write_bytes(dir / "h.csv", "a,b\n1,2\n");
  write_bytes(dir / "n.csv", "1,2\n");
  DataOptions options;
  options.label_column = "class";
  EXPECT_THAT([&] { read_csv(dir / "h.csv", options); },
              ThrowsMessage<UsageError>(AllOf(HasSubstr("h.csv"), HasSubstr("'class'"),
                                              HasSubstr("the header has: a, b"))));
  EXPECT_THAT([&] { read_csv(dir / "n.csv", options); },
              ThrowsMessage<UsageError>(HasSubstr("no header row")));
  options.label_column = "2";
  EXPECT_THAT([&] { read_csv(dir / "n.csv", options); },
              ThrowsMessage<UsageError>(HasSubstr("--label_column 2 is out of range")));
}

TEST(CsvReader, GzipCompressedFilesAreReadByTheirName) {
  TempDir dir;
  const std::string text = "a,b,label\n1,2,3\n4,5,6\n";
  gzFile file = gzopen((dir / "c.csv.gz").c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(file), Z_OK);
  const std::vector<Row> rows = read_csv(dir / "c.csv.gz");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_THAT(rows[1].features, ElementsAre(4.0f, 5.0f));
  EXPECT_EQ(rows[1].label, 6);
}

TEST(CsvReader, ALastLineWithoutALineEndIsRead) {
  TempDir dir;
  write_bytes(dir / "e.csv", "1,2\n3,4");
  EXPECT_EQ(read_csv(dir / "e.csv").back().label, 4);
}

// Reading `text` as a CSV file must fail with a DataError holding every part of `expected`.
void expect_rejected(const std::string& text, const std::vector<std::string>& expected) {
  TempDir dir;
  write_bytes(dir / "bad.csv", text);
  try {
    read_csv(dir / "bad.csv");
    FAIL() << "accepted: " << text;
  } catch (const DataError& e) {
    for (const std::string& part : expected) EXPECT_THAT(e.what(), HasSubstr(part)) << text;
  }
}

TEST(CsvReader, AMalformedRowIsNamedByLineAndColumn) {
  expect_rejected("a,b,label\n1,2,3\n\n1,2\n", {"bad.csv:4", "has 2 fields; expected 3"});
  expect_rejected("a,b,label\n1,x,3\n",
                  {"bad.csv:2", "column 1 ('b')", "'x' is not a finite number"});
  expect_rejected("1,2,3\n1,nan,3\n", {"bad.csv:2", "column 1", "'nan' is not a finite number"});
  expect_rejected("1,2,3\n1,1e40,3\n", {"bad.csv:2", "column 1"});
  expect_rejected("a,b,label\n1,2,3.5\n",
                  {"bad.csv:2", "column 2 ('label')", "label '3.5' is not a non-negative integer"});
  expect_rejected("1,2,3\n1,2,-1\n", {"bad.csv:2", "label '-1'"});
  expect_rejected("1,2,3\n1,2,\n", {"bad.csv:2", "label ''"});
  expect_rejected("1,2,3\n1,\"2,3\n", {"bad.csv:2", "column 1", "quote"});
}

TEST(CsvReader, AnEmptyFileOrASingleColumnIsRefused) {
  expect_rejected("", {"bad.csv", "is empty"});
  expect_rejected("\n\r\n", {"bad.csv", "is empty"});
  expect_rejected("1\n2\n", {"bad.csv:1", "has 1 column"});
}

}  // namespace
}  // namespace dtrain
