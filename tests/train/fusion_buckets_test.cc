// The cut of the gradient arena into fusion buckets, as a pure function of the layout.
#include "train/fusion_buckets.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "nn/model_zoo.h"
#include "nn/param_set.h"

namespace dtrain {
namespace {

ParamSet layout_of(const std::string& model_name) {
  ModelConfig config;
  config.name = model_name;
  return ParamSet(make_model(config)->param_specs());
}

// Where tensor i's extent ends: the next tensor's start, or the arena's end (its padding is its).
size_t extent_end(const ParamSet& layout, size_t i) {
  return i + 1 < layout.count() ? layout.offset(i + 1) : layout.flat().size();
}

TEST(FusionBuckets, ZeroMeansOneBucketOverTheWholeArena) {
  const ParamSet layout = layout_of("mnist_inference");
  EXPECT_EQ(fusion_buckets(layout, 0),
            (std::vector<ArenaSlice>{{.begin = 0, .size = layout.flat().size()}}));
}

TEST(FusionBuckets, ALargeTensorIsCutAndItsLastPieceSharedWithTheNext) {
  // softmax: w (784 x 10 = 7840 floats), then b (10 floats and its padding).
  const ParamSet layout = layout_of("softmax");
  ASSERT_EQ(layout.count(), 2u);
  ASSERT_EQ(layout.offset(1), 7840u);
  const size_t arena = layout.flat().size();
  // 4 KiB = 1024 floats: seven whole pieces of w, then w's last 672 floats together with b.
  std::vector<ArenaSlice> expected;
  for (size_t begin = 0; begin < 7168; begin += 1024) expected.push_back({begin, 1024});
  expected.push_back({7168, arena - 7168});
  EXPECT_EQ(fusion_buckets(layout, 4096), expected);
}

TEST(FusionBuckets, BucketsCoverTheArenaInOrderAndKeepTensorsThatFitWhole) {
  for (const std::string model : {"softmax", "mlp", "mnist_inference", "lenet"}) {
    const ParamSet layout = layout_of(model);
    for (const size_t bytes : {size_t{4}, size_t{1000}, size_t{4096}, size_t{40'000},
                               size_t{1'000'000}, size_t{1} << 30}) {
      SCOPED_TRACE(fmt::format("{}, fusion_bytes {}", model, bytes));
      const std::vector<ArenaSlice> buckets = fusion_buckets(layout, bytes);
      size_t next = 0;
      for (const ArenaSlice& bucket : buckets) {
        EXPECT_EQ(bucket.begin, next);
        EXPECT_GT(bucket.size, 0u);
        EXPECT_LE(bucket.size * sizeof(float), bytes);
        next = bucket.begin + bucket.size;
      }
      EXPECT_EQ(next, layout.flat().size());
      // A tensor whose extent fits in a bucket lies within one.
      for (size_t i = 0; i < layout.count(); ++i) {
        const size_t begin = layout.offset(i), end = extent_end(layout, i);
        if ((end - begin) * sizeof(float) > bytes) continue;
        EXPECT_TRUE(std::any_of(
            buckets.begin(), buckets.end(),
            [&](const ArenaSlice& b) { return b.begin <= begin && end <= b.begin + b.size; }))
            << "tensor " << layout.spec(i).name << " is split";
      }
    }
  }
}

}  // namespace
}  // namespace dtrain
