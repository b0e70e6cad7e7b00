// ParamSet arenas written to and restored from checkpoints, optimizer slots included.
#include "ckpt/param_set_checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "support/temp_dir.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

std::vector<ParamSpec> mlp_specs() {
  return {{"hid_w", {3, 5}}, {"hid_b", {5}}, {"sm_w", {5, 2}}, {"sm_b", {2}}};
}

void fill(ParamSet& params, float base) {
  for (size_t i = 0; i < params.count(); ++i) {
    std::span<float> v = params.values(i);
    for (size_t j = 0; j < v.size(); ++j) v[j] = base + static_cast<float>(i * 100 + j);
  }
}

TEST(ParamSetCheckpointTest, ParamsAndSlotsRoundTripThroughACheckpoint) {
  ParamSet params(mlp_specs());
  ParamSet adam_m(mlp_specs());
  fill(params, 1.0f);
  fill(adam_m, -7.0f);
  std::vector<TensorRef> refs;
  append_tensor_refs(params, refs);
  append_tensor_refs(adam_m, refs, "/adam_m");
  TempDir dir;
  write_checkpoint(dir / "c.safetensors", CheckpointInfo{3, "mlp", "adam", nullptr}, refs);

  Checkpoint ckpt = read_checkpoint(dir / "c.safetensors");
  ASSERT_NE(ckpt.find("sm_w/adam_m"), nullptr);
  ParamSet restored(mlp_specs());
  ParamSet restored_m(mlp_specs());
  load_tensors(ckpt, restored);
  load_tensors(ckpt, restored_m, "/adam_m");

  for (size_t i = 0; i < params.count(); ++i) {
    EXPECT_TRUE(
        std::equal(params.values(i).begin(), params.values(i).end(), restored.values(i).begin()));
    EXPECT_TRUE(
        std::equal(adam_m.values(i).begin(), adam_m.values(i).end(), restored_m.values(i).begin()));
  }
}

TEST(ParamSetCheckpointTest, ShapeMismatchNamesTheTensorAndLeavesParamsUntouched) {
  Checkpoint ckpt;
  ckpt.model = "mlp";
  ckpt.tensors.push_back({"hid_w", {3, 5}, std::vector<float>(15, 9.0f)});
  ckpt.tensors.push_back({"hid_b", {4}, std::vector<float>(4, 9.0f)});
  ParamSet params({{"hid_w", {3, 5}}, {"hid_b", {5}}});

  try {
    load_tensors(ckpt, params);
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'hid_b'"));
    EXPECT_THAT(e.what(), HasSubstr("[4]"));
    EXPECT_THAT(e.what(), HasSubstr("[5]"));
  }
  EXPECT_EQ(params.values(0)[0], 0.0f);
}

TEST(ParamSetCheckpointTest, MissingTensorIsNamed) {
  Checkpoint ckpt;
  ParamSet params({{"hid_w", {2}}});
  EXPECT_THAT([&] { load_tensors(ckpt, params, "/momentum"); },
              ::testing::ThrowsMessage<CheckpointError>(HasSubstr("'hid_w/momentum'")));
}

}  // namespace
}  // namespace dtrain
