// The optimizer's rows of the flag table. Momentum, epsilon and weight decay default by optimizer,
// so they record the value in force (optim/optimizer.h: optimizer_defaults).
#include "plan/optimizer_flags.h"

namespace dtrain {
namespace {

// The optimizer's settings as it runs with them: its defaults where no flag was given.
template <auto kMember>
nlohmann::json recorded_optimizer(const TrainConfig& c) {
  return optimizer_defaults(c.optimizer).*kMember;
}
template <auto kMember>
nlohmann::json recorded_optimizer_member(const TrainConfig& c) {
  return c.optimizer.*kMember;
}

}  // namespace

std::vector<FlagSpec> optimizer_rows() {
  using F = FlagValues;
  return {
      {.name = "--momentum",
       .field = &F::momentum,
       .help = "momentum, sgd, rmsprop: the momentum (default: 0.9 for momentum, 0 -- none -- for "
               "sgd and rmsprop)",
       .recorded = {"optimizer_config.momentum",
                    recorded_optimizer<&EffectiveOptimizer::momentum>}},
      {.name = "--nesterov",
       .field = &F::nesterov,
       .help = "momentum, and sgd with --momentum: Nesterov momentum",
       .is_switch = true,
       .recorded = {"optimizer_config.nesterov",
                    recorded_optimizer_member<&OptimizerConfig::use_nesterov>}},
      {.name = "--beta_1",
       .field = &F::beta_1,
       .help = "adam, adamw, nadam: decay of the first moment",
       .show_default = true,
       .recorded = {"optimizer_config.beta_1", recorded_optimizer_member<&OptimizerConfig::beta1>}},
      {.name = "--beta_2",
       .field = &F::beta_2,
       .help = "adam, adamw, nadam: decay of the second moment",
       .show_default = true,
       .recorded = {"optimizer_config.beta_2", recorded_optimizer_member<&OptimizerConfig::beta2>}},
      {.name = "--epsilon",
       .field = &F::epsilon,
       .help = "adam, adamw, nadam, rmsprop, adagrad: the epsilon of the denominator (default: "
               "1e-8 for adam, TensorFlow 1's; 1e-7 for the others, Keras 3's)",
       .recorded = {"optimizer_config.epsilon", recorded_optimizer<&EffectiveOptimizer::epsilon>}},
      {.name = "--rho",
       .field = &F::rho,
       .help = "rmsprop: decay of the mean square",
       .show_default = true,
       .recorded = {"optimizer_config.rho", recorded_optimizer_member<&OptimizerConfig::rho>}},
      {.name = "--centered",
       .field = &F::centered,
       .help = "rmsprop: divide by the gradient's estimated variance, not its second moment",
       .is_switch = true,
       .recorded = {"optimizer_config.centered",
                    recorded_optimizer_member<&OptimizerConfig::centered>}},
      {.name = "--initial_accumulator_value",
       .field = &F::initial_accumulator_value,
       .help = "adagrad: the accumulators' starting value",
       .show_default = true,
       .recorded = {"optimizer_config.initial_accumulator_value",
                    recorded_optimizer_member<&OptimizerConfig::initial_accumulator_value>}},
      {.name = "--weight_decay",
       .field = &F::weight_decay,
       .help = "Decoupled weight decay, any optimizer: each step value -= value x weight_decay x "
               "learning rate, before the rule, trainable weights only (default: 0.004 for adamw, "
               "0 -- none -- for the others)",
       .recorded = {"optimizer_config.weight_decay",
                    recorded_optimizer<&EffectiveOptimizer::weight_decay>}},
      {.name = "--clipnorm",
       .field = &F::clipnorm,
       .help = "Clip each variable's aggregated gradient to this L2 norm, as Keras' clipnorm "
               "(0: off)",
       .show_default = true,
       .recorded = {"optimizer_config.clipnorm",
                    recorded_optimizer_member<&OptimizerConfig::clipnorm>}},
      {.name = "--global_clipnorm",
       .field = &F::global_clipnorm,
       .help = "Clip the aggregated gradients of all variables together to this L2 norm, as "
               "Keras' global_clipnorm (0: off; not under the ps strategies)",
       .show_default = true,
       .recorded = {"optimizer_config.global_clipnorm",
                    recorded_optimizer_member<&OptimizerConfig::global_clipnorm>}},
      {.name = "--clipvalue",
       .field = &F::clipvalue,
       .help = "Clip each value of the aggregated gradient into [-clipvalue, clipvalue], as "
               "Keras' clipvalue (0: off)",
       .show_default = true,
       .recorded = {"optimizer_config.clipvalue",
                    recorded_optimizer_member<&OptimizerConfig::clipvalue>}},
  };
}

}  // namespace dtrain
