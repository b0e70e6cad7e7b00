// StreamingSource: each epoch is the files' examples once, shuffled by a tf.data-style buffer;
// workers take disjoint slices of one global order; reader errors reach next(); the reader thread
// stops on destruction; memory stays at the buffer and a few batches however large the file.
#include "data/streaming_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/data_files.h"
#include "data/idx_example_reader.h"
#include "support/temp_dir.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

// A "file" of count examples of one feature each: example i of the file whose first example is
// `first` has feature first + i and label (first + i) % 10. With fail_at, next() throws a
// DataError naming the file at that example; with known_count, example_count() tells the count.
class CountingReader final : public ExampleReader {
 public:
  CountingReader(std::string name, int64_t first, int64_t count, bool known_count,
                 std::optional<int64_t> fail_at = std::nullopt)
      : name_(std::move(name)),
        first_(first),
        count_(count),
        known_count_(known_count),
        fail_at_(fail_at) {}
  int64_t feature_count() const override { return 1; }
  bool next(std::span<float> features, int32_t& label) override {
    if (fail_at_ && index_ == *fail_at_) throw DataError(position() + ": malformed record");
    if (index_ == count_) return false;
    features[0] = static_cast<float>(first_ + index_);
    label = static_cast<int32_t>((first_ + index_) % 10);
    ++index_;
    return true;
  }
  std::optional<int64_t> example_count() const override {
    return known_count_ ? std::optional<int64_t>(count_) : std::nullopt;
  }
  std::string position() const override { return name_ + ":" + std::to_string(index_ + 1); }

 private:
  std::string name_;
  int64_t first_, count_;
  bool known_count_;
  std::optional<int64_t> fail_at_;
  int64_t index_ = 0;
};

// Files named "<first>+<count>" ("0+100", "100+125") open as CountingReaders.
std::vector<std::filesystem::path> counting_files(const std::vector<int64_t>& counts) {
  std::vector<std::filesystem::path> files;
  int64_t first = 0;
  for (int64_t count : counts) {
    files.emplace_back(std::to_string(first) + "+" + std::to_string(count));
    first += count;
  }
  return files;
}

ExampleReaderFactory counting_reader(bool known_count = false,
                                     std::optional<int64_t> fail_at = std::nullopt) {
  return [=](const std::filesystem::path& path) {
    const std::string name = path.string();
    const size_t plus = name.find('+');
    return std::make_unique<CountingReader>(name, std::stoll(name.substr(0, plus)),
                                            std::stoll(name.substr(plus + 1)), known_count,
                                            fail_at);
  };
}

// The features of the next `steps` batches, concatenated.
std::vector<int64_t> take(BatchSource& source, int64_t steps) {
  std::vector<int64_t> values;
  for (int64_t s = 0; s < steps; ++s) {
    const Batch& batch = source.next();
    for (int i = 0; i < batch.size; ++i) {
      values.push_back(static_cast<int64_t>(batch.images[i]));
      EXPECT_EQ(batch.labels[i], values.back() % 10);
    }
  }
  return values;
}

std::vector<int64_t> range(int64_t n) {
  std::vector<int64_t> values(n);
  std::iota(values.begin(), values.end(), 0);
  return values;
}

StreamingOptions options(int batch_size, int64_t shuffle_buffer, uint64_t seed = 7) {
  StreamingOptions options;
  options.batch_size = batch_size;
  options.shuffle_buffer = shuffle_buffer;
  options.seed = seed;
  return options;
}

TEST(StreamingSource, EachEpochHoldsEveryExampleOfTheFilesOnceInAShuffledOrder) {
  StreamingSource source(counting_files({100, 125, 75}), counting_reader(), options(10, 50));
  ASSERT_EQ(source.example_count(), 300);
  ASSERT_EQ(source.steps_per_epoch(), 30);

  EXPECT_EQ(source.epoch(), 0);
  std::vector<int64_t> first = take(source, 30);
  EXPECT_EQ(source.epoch(), 1);
  std::vector<int64_t> second = take(source, 30);

  EXPECT_NE(first, range(300));
  EXPECT_NE(first, second);  // reshuffled every epoch
  std::sort(first.begin(), first.end());
  std::sort(second.begin(), second.end());
  EXPECT_EQ(first, range(300));
  EXPECT_EQ(second, range(300));
}

TEST(StreamingSource, AnExampleLeavesNoEarlierThanTheBufferAllows) {
  // Output i is drawn from the buffer after i + N inputs, so it is one of inputs 0..i+N-1.
  const int64_t buffer = 20;
  StreamingSource source(counting_files({200}), counting_reader(), options(1, buffer));
  const std::vector<int64_t> order = take(source, 200);
  for (int64_t i = 0; i < 200; ++i) EXPECT_LT(order[i], i + buffer) << "output " << i;
}

TEST(StreamingSource, BufferOfOneKeepsTheFilesOrder) {
  StreamingSource source(counting_files({30, 20}), counting_reader(), options(5, 1));
  EXPECT_EQ(take(source, 10), range(50));
  EXPECT_EQ(take(source, 10), range(50));
}

TEST(StreamingSource, TheRemainderShortOfAGlobalBatchIsDropped) {
  StreamingOptions two_workers = options(10, 1000);
  two_workers.worker_count = 2;
  StreamingSource source(counting_files({95}), counting_reader(), two_workers);
  EXPECT_EQ(source.steps_per_epoch(), 4);  // 95 / (2 * 10)
  std::vector<int64_t> epoch = take(source, 4);
  std::sort(epoch.begin(), epoch.end());
  EXPECT_EQ(std::adjacent_find(epoch.begin(), epoch.end()), epoch.end());  // no repeats
  EXPECT_EQ(source.epoch(), 1);
}

TEST(StreamingSource, WorkersTakeDisjointSlicesThatMakeUpTheGlobalBatch) {
  const int workers = 3, batch = 4;
  StreamingSource whole(counting_files({50, 70}), counting_reader(), options(workers * batch, 16));
  std::vector<std::unique_ptr<StreamingSource>> slices;
  for (int k = 0; k < workers; ++k) {
    StreamingOptions worker = options(batch, 16);
    worker.worker_index = k;
    worker.worker_count = workers;
    slices.push_back(
        std::make_unique<StreamingSource>(counting_files({50, 70}), counting_reader(), worker));
    EXPECT_EQ(slices.back()->steps_per_epoch(), whole.steps_per_epoch());
  }
  // Two epochs: the second must agree too.
  for (int64_t step = 0; step < 2 * whole.steps_per_epoch(); ++step) {
    std::vector<int64_t> joined;
    for (auto& slice : slices) {
      const std::vector<int64_t> part = take(*slice, 1);
      joined.insert(joined.end(), part.begin(), part.end());
    }
    EXPECT_EQ(joined, take(whole, 1)) << "step " << step;
  }
}

TEST(StreamingSource, SeekGivesTheBatchesOfAFreshSourceFromThatStep) {
  StreamingSource fresh(counting_files({64}), counting_reader(), options(8, 10));
  const std::vector<int64_t> steps_0_to_19 = take(fresh, 20);

  StreamingSource resumed(counting_files({64}), counting_reader(), options(8, 10));
  take(resumed, 3);
  resumed.seek(13);
  EXPECT_EQ(resumed.epoch(), 1);
  EXPECT_EQ(take(resumed, 7),
            std::vector<int64_t>(steps_0_to_19.begin() + 13 * 8, steps_0_to_19.end()));
}

TEST(StreamingSource, StepsComeFromTheHeaderCountWithoutACountingPass) {
  // The reader fails at its first example: only a counting pass would read one.
  StreamingSource source(counting_files({100}), counting_reader(true, 0), options(10, 10));
  EXPECT_EQ(source.steps_per_epoch(), 10);
}

TEST(StreamingSource, AReaderErrorSurfacesAtNextNamingTheFileAndStays) {
  StreamingSource source(counting_files({40, 40}), counting_reader(true, 25), options(10, 5));
  EXPECT_THAT([&] { take(source, 8); },
              ::testing::ThrowsMessage<DataError>(HasSubstr("0+40:26: malformed record")));
  EXPECT_THAT([&] { source.next(); }, ::testing::ThrowsMessage<DataError>(HasSubstr("0+40:26")));
}

TEST(StreamingSource, DestructionStopsAndJoinsTheReaderMidEpoch) {
  // A stream far longer than the queue: the reader waits for a free batch or is reading when the
  // source goes. The test passes by returning.
  for (int taken : {0, 1, 5}) {
    StreamingSource source(counting_files({1'000'000}), counting_reader(true), options(10, 1000));
    take(source, taken);
  }
}

TEST(StreamingSource, FilesDisagreeingOnFeatureCountAreNamed) {
  const auto factory = [](const std::filesystem::path& path) -> std::unique_ptr<ExampleReader> {
    if (path == "b") {
      struct Wide : ExampleReader {
        int64_t feature_count() const override { return 2; }
        bool next(std::span<float>, int32_t&) override { return false; }
        std::string position() const override { return "b"; }
      };
      return std::make_unique<Wide>();
    }
    return std::make_unique<CountingReader>("a", 0, 10, true);
  };
  EXPECT_THAT(
      [&] {
        StreamingSource({"a", "b"}, factory, options(1, 1));
      },
      ::testing::ThrowsMessage<DataError>(HasSubstr("a has 1 features per example but b has 2")));
}

TEST(StreamingSource, AGlobalBatchLargerThanTheDataIsAUsageError) {
  StreamingOptions four = options(10, 10);
  four.worker_count = 4;
  EXPECT_THAT([&] { StreamingSource(counting_files({39}), counting_reader(), four); },
              ::testing::ThrowsMessage<UsageError>(
                  HasSubstr("a global batch of 40 examples (4 workers) exceeds the 39 examples")));
}

TEST(StreamingSource, StreamsCsvFilesThroughOpenExampleReaderCountingThemFirst) {
  // CSV has no count in a header: steps_per_epoch comes from the counting pass.
  TempDir dir;
  int64_t next_value = 0;
  for (const char* name : {"part-0.csv", "part-1.csv.gz", "part-2.csv"}) {
    std::string text = "x,z,label\n";
    for (int row = 0; row < 40; ++row, ++next_value) {
      text += std::to_string(next_value) + ",0.5," + std::to_string(next_value % 10) + "\n";
    }
    testing::write_bytes(dir / name, text);
  }
  // write_bytes wrote part-1.csv.gz raw; gzip it.
  const std::string raw = testing::read_bytes(dir / "part-1.csv.gz");
  gzFile gz = gzopen((dir / "part-1.csv.gz").c_str(), "wb");
  ASSERT_EQ(gzwrite(gz, raw.data(), static_cast<unsigned>(raw.size())),
            static_cast<int>(raw.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);

  const DataOptions csv;
  StreamingSource source(
      expand_data_paths((dir / "part-*").string()),
      [&](const std::filesystem::path& path) { return open_example_reader(path, csv); },
      options(8, 25));
  ASSERT_EQ(source.feature_count(), 2);
  ASSERT_EQ(source.steps_per_epoch(), 15);
  std::vector<int64_t> values;
  for (int64_t s = 0; s < 15; ++s) {
    const Batch& batch = source.next();
    for (int i = 0; i < batch.size; ++i) {
      values.push_back(static_cast<int64_t>(batch.images[2 * i]));
      EXPECT_EQ(batch.images[2 * i + 1], 0.5f);
      EXPECT_EQ(batch.labels[i], values.back() % 10);
    }
  }
  EXPECT_NE(values, range(120));
  std::sort(values.begin(), values.end());
  EXPECT_EQ(values, range(120));
}

// Peak resident memory of this process in bytes (VmHWM), after resetting it to the current
// resident size where the kernel allows (clear_refs, Linux 4.0+).
int64_t peak_resident_bytes(bool reset) {
  if (reset) std::ofstream("/proc/self/clear_refs") << "5";
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("VmHWM:")) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

// An IDX pair of count 28x28 images written in chunks, so that writing it holds little memory.
void write_large_idx(const std::filesystem::path& images, const std::filesystem::path& labels,
                     uint32_t count) {
  auto header = [](std::ofstream& out, std::vector<uint32_t> dims) {
    const char magic[4] = {0, 0, 0x08, static_cast<char>(dims.size())};
    out.write(magic, 4);
    for (uint32_t dim : dims) {
      const char bytes[4] = {static_cast<char>(dim >> 24), static_cast<char>(dim >> 16),
                             static_cast<char>(dim >> 8), static_cast<char>(dim)};
      out.write(bytes, 4);
    }
  };
  std::ofstream image_out(images, std::ios::binary), label_out(labels, std::ios::binary);
  header(image_out, {count, 28, 28});
  header(label_out, {count});
  std::vector<char> chunk(784 * 1000);
  for (uint32_t i = 0; i < count; i += 1000) {
    std::fill(chunk.begin(), chunk.end(), static_cast<char>(i / 1000));
    image_out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    for (uint32_t j = 0; j < 1000; ++j) label_out.put(static_cast<char>(j % 10));
  }
  ASSERT_TRUE(image_out.good() && label_out.good());
}

TEST(StreamingSource, MemoryStaysAtTheBufferAndAFewBatchesForAFileFarLargerThanBoth) {
  TempDir dir;
  const uint32_t count = 200'000;  // 157 MB of pixels, 627 MB as floats
  write_large_idx(dir / "big-images-idx3-ubyte", dir / "big-labels-idx1-ubyte", count);
  const auto open = [&](const std::filesystem::path&) {
    return std::make_unique<IdxExampleReader>(dir / "big-images-idx3-ubyte",
                                              dir / "big-labels-idx1-ubyte");
  };
  StreamingOptions streaming = options(100, 5000);
  const int64_t before = peak_resident_bytes(true);
  int64_t examples = 0;
  {
    StreamingSource source({dir / "big-images-idx3-ubyte"}, open, streaming);
    for (int64_t s = 0; s < source.steps_per_epoch(); ++s) examples += source.next().size;
  }
  const int64_t growth = peak_resident_bytes(false) - before;

  const int64_t example_bytes = 784 * sizeof(float);
  const int64_t expected =
      (streaming.shuffle_buffer + (streaming.prefetch_batches + 1) * streaming.batch_size) *
      example_bytes;
  // Margin: the reader thread's stack and its malloc arena, stdio's buffer and the reader's
  // one-image scratch: a few MiB in all; 16 MiB leaves room and is still a tenth of the file.
  const int64_t margin = int64_t{16} << 20;
  std::printf(
      "streamed %lld examples (%lld MB as floats): peak RSS grew %.1f MiB; buffer + "
      "batches %.1f MiB\n",
      static_cast<long long>(examples), static_cast<long long>(count * example_bytes >> 20),
      growth / 1048576.0, expected / 1048576.0);
  EXPECT_EQ(examples, count);
  EXPECT_LT(growth, expected + margin);
}

}  // namespace
}  // namespace dtrain
