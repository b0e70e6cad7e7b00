// plan_model: shapes and sizes from a spec alone, and the refusal of specs whose sizes overflow or
// pass the memory limit, at the layer where they do, before anything is allocated.
#include "nn/model_plan.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "base/machine_memory.h"
#include "nn/model_zoo.h"
#include "support/hostile_models.h"

namespace dtrain {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::ThrowsMessage;

constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST(ModelPlan, AConvKernelOf65536SquaredIsRefusedNamingTheLayerItsSizeAndTheLimit) {
  const int64_t parameters = int64_t{65536} * 65536 * 32 + 32;
  EXPECT_THAT([] { plan_model(testing::conv_kernel_65536_squared(), kGiB, "model.json"); },
              ThrowsMessage<TooLargeError>(
                  AllOf(HasSubstr("model.json: layer 0 (Conv2D 'conv'): "),
                        HasSubstr(fmt::format("{} parameters", parameters)),
                        HasSubstr(fmt::format("more than the {} of memory", format_bytes(kGiB))),
                        Not(HasSubstr("\n")))));
}

TEST(ModelPlan, AReshapeTargetWhoseProductPassesInt64IsRefusedWithoutDividing) {
  EXPECT_THAT([] { plan_model(testing::reshape_beyond_int64(), kGiB, "model.json"); },
              ThrowsMessage<UsageError>(
                  HasSubstr("model.json: layer 0 (Reshape 'reshape'): target_shape [-1, "
                            "4611686018427387904, 4] does not divide input shape [784]")));
}

// The default limit is this machine's memory, and build_model checks it before building a layer.
TEST(ModelPlan, ADenseOfABillionUnitsIsRefusedByBuildModelAgainstThisMachinesMemory) {
  EXPECT_THAT([] { build_model(testing::dense_of_a_billion_units(), {}, "model.json"); },
              ThrowsMessage<TooLargeError>(
                  AllOf(HasSubstr(fmt::format("model.json: layer 0 (Dense 'dense'): {} parameters",
                                              int64_t{784} * 1'000'000'000 + 1'000'000'000)),
                        HasSubstr(fmt::format("more than the {} of memory this machine has",
                                              format_bytes(machine_memory_bytes()))))));
}

// The layer named is the first at which the model's running total passes the limit: the model cut
// just before it is accepted, and cut just after it is not.
TEST(ModelPlan, AChainOfWideLayersIsRefusedAtTheFirstLayerThatPassesTheLimit) {
  const uint64_t limit = 512 * kGiB;
  const ModelSpec chain = testing::chain_of_wide_layers(40);
  size_t accepted = 0;
  for (;;) {
    ModelSpec prefix = chain;
    prefix.layers.resize(accepted + 1);
    try {
      plan_model(prefix, limit, "chain.json");
    } catch (const TooLargeError&) {
      break;
    }
    ASSERT_LT(++accepted, chain.layers.size()) << "the whole chain fits in the limit";
  }
  ASSERT_GT(accepted, 0u);
  EXPECT_THAT([&] { plan_model(chain, limit, "chain.json"); },
              ThrowsMessage<TooLargeError>(HasSubstr(
                  fmt::format("chain.json: layer {} (Dense 'wide_{}'): ", accepted, accepted))));
}

TEST(ModelPlan, AModelIsAcceptedAtItsOwnSizeAndRefusedOneByteBelowIt) {
  const ModelSpec lenet = model_spec({.name = "lenet"});
  const ModelPlan plan = plan_model(lenet, UINT64_MAX, "lenet");
  EXPECT_EQ(plan_model(lenet, static_cast<uint64_t>(plan.bytes), "lenet").bytes, plan.bytes);
  const size_t last = lenet.layers.size() - 1;
  EXPECT_THAT([&] { plan_model(lenet, static_cast<uint64_t>(plan.bytes) - 1, "lenet"); },
              ThrowsMessage<TooLargeError>(HasSubstr(
                  fmt::format("lenet: layer {} (Dense '{}')", last, lenet.layers[last].name))));
}

TEST(ModelPlan, CountsTheParametersAndShapesEachBuiltInModelIsBuiltWith) {
  for (const std::string& name : model_names()) {
    const ModelSpec spec = model_spec({.name = name});
    const ModelPlan plan = plan_model(spec, UINT64_MAX, name);
    const std::unique_ptr<Model> model = build_model(spec, {}, name);
    EXPECT_EQ(plan.parameters, ParamSet(model->param_specs()).num_values()) << name;
    EXPECT_EQ(plan.layers.back().output_shape, model->layers().back()->output_shape()) << name;
  }
}

TEST(ModelPlan, AnInputDimensionBeyondWhatTheLayersIndexIsRefused) {
  ModelSpec spec = testing::dense_of_a_billion_units();
  spec.input_shape = {int64_t{1} << 31};
  EXPECT_THAT([&] { plan_model(spec, UINT64_MAX, "model.json"); },
              ThrowsMessage<UsageError>(HasSubstr("model.json: input shape [2147483648]")));
}

// Under a limit that lets any size through, the patch a Conv2D's kernels index in an int is still
// bounded.
TEST(ModelPlan, AConvPatchBeyondIntIsRefusedEvenWhenMemoryWouldAllowIt) {
  ModelSpec spec = testing::conv_kernel_65536_squared();
  spec.input_shape = {1, 1, int64_t{1} << 30};
  spec.layers[0].kernel_size = {3, 3};
  EXPECT_THAT([&] { plan_model(spec, UINT64_MAX, "model.json"); },
              ThrowsMessage<UsageError>(HasSubstr(
                  "model.json: layer 0 (Conv2D 'conv'): a 3x3 kernel over 1073741824 channels is "
                  "a patch of 9663676416 values")));
}

}  // namespace
}  // namespace dtrain
