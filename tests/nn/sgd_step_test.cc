// ModelRunner::sgd_step folds plain SGD into backward. It must land where computing the gradients
// and then applying Sgd lands, for layers that fold the step into their GEMM (Dense) and for those
// that go through the gradient buffer (Conv2D), with and without a thread team.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "nn/init.h"
#include "nn/model.h"
#include "nn/model_zoo.h"
#include "optim/optimizer.h"
#include "tensor/thread_team.h"

namespace dtrain {
namespace {

class SgdStepTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(SgdStepTest, EqualsGradientsThenSgdApply) {
  const auto& [model_name, team_size] = GetParam();
  // A large rate and L2 coefficient, so a step that used the updated weights for din, or forgot
  // the L2 term, would be off by far more than the tolerance below.
  const float lr = 0.5f, l2 = 0.1f;
  std::unique_ptr<Model> model = make_model({.name = model_name, .hidden_units = 16, .l2 = l2});
  ParamSet start(model->param_specs());
  initialize_params(start, 11);
  std::mt19937 rng(4);
  const int n = 12;
  std::vector<float> images(size_t(n) * model->input_size());
  std::vector<int32_t> labels(n);
  for (float& x : images) x = float(rng() % 256) / 255.0f;
  for (int32_t& y : labels) y = int32_t(rng() % 10);
  Workspace workspace(*model, n);
  ThreadTeam team(team_size);
  ScopedTeam scope(&team);
  ModelRunner runner(*model, workspace);

  ParamSet reference = start;
  GradSet grads(model->param_specs());
  const float reference_loss =
      runner.compute_gradients(reference, images.data(), labels.data(), n, grads);
  std::unique_ptr<Optimizer> sgd = make_optimizer({.name = "sgd"}, model->param_specs());
  ASSERT_TRUE(sgd->plain_sgd());
  sgd->apply(reference, grads, lr, 0);

  ParamSet folded = start;
  GradSet scratch(model->param_specs());
  const float folded_loss = runner.sgd_step(folded, images.data(), labels.data(), n, scratch, lr);

  // The loss is taken before the step by the same forward pass.
  EXPECT_EQ(folded_loss, reference_loss);
  // Folded, w - lr·(l2·w + g) becomes (1 - lr·l2)·w - lr·g: the same terms, rounded in another
  // order, so each value may differ by a few roundings of the largest term it sums.
  std::span<const float> w0 = start.flat(), g = grads.flat();
  std::span<const float> want = reference.flat(), got = folded.flat();
  size_t changed = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const float tolerance = 8 * FLT_EPSILON * (std::abs(w0[i]) + lr * std::abs(g[i]));
    ASSERT_NEAR(got[i], want[i], tolerance) << "value " << i << " of " << model_name;
    changed += got[i] != w0[i];
  }
  EXPECT_GT(changed, want.size() / 2) << "the step left most values where they were";
}

INSTANTIATE_TEST_SUITE_P(Models, SgdStepTest,
                         ::testing::Combine(::testing::Values("softmax", "mlp", "mnist_inference",
                                                              "lenet"),
                                            ::testing::Values(1, 2)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_team" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace dtrain
