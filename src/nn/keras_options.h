// Reading one Keras layer's config option by option, for the model reader in nn/keras_json.h:
// each option is checked as it is read, the keys read are recorded, and whatever is left must be a
// Keras default (null, name, trainable true, float32 ...). Every failure is a UsageError naming the
// source, the layer and the option, e.g.
//   model.json: layer 3 (Conv2D): dilation_rate [2, 2] is not supported (only 1)
#pragma once

#include <array>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nn/model_spec.h"

namespace dtrain {

namespace keras {

// A JSON value as a message shows it: arrays as "[2, 2]", strings quoted.
std::string show(const nlohmann::json& value);

// Keras 2's SavedModel metadata writes tuples and shapes as {"class_name": "__tuple__" or
// "TensorShape", "items": [...]}: the list itself.
const nlohmann::json& unwrap(const nlohmann::json& v);

}  // namespace keras

// Reads one layer's config; every failure names the source, the layer and the option.
// The reader keeps references to source and config: both must outlive it.
class OptionReader {
 public:
  using json = nlohmann::json;

  OptionReader(const std::string& source, size_t index, std::string class_name, const json& config)
      : source_(source), index_(index), class_name_(std::move(class_name)), config_(config) {}

  [[noreturn]] void fail(const std::string& what) const;
  [[noreturn]] void unsupported(const std::string& key, const json& value,
                                const std::string& only) const;

  bool has(const std::string& key) const {
    return config_.contains(key) && !config_.at(key).is_null();
  }
  const json& get(const std::string& key);

  int positive_int(const std::string& key);

  // An int n or a pair [a, b], as Keras' kernel_size, strides and pool_size.
  std::array<int, 2> pair(const std::string& key);

  // A number within [lo, hi] (above lo when lo_open), fallback when absent or null.
  float bounded_number(const std::string& key, float fallback, double lo, double hi, bool lo_open);

  // A key whose value does not matter to dtrain (an option of something refused elsewhere).
  void ignore(const std::string& key) { used_.insert(key); }

  bool boolean(const std::string& key, bool fallback);

  Padding padding();

  ActivationKind activation(const std::string& key);

  InitSpec initializer(const std::string& key, InitSpec fallback);

  // Keras' L2 (or L1L2 with l1 = 0) on the kernel: its coefficient, 0 for none.
  double kernel_l2();

  // Every key not read must hold a Keras default. `defaults` lists this layer's keys whose
  // default is not null, with that default.
  void check_rest(const std::vector<std::pair<std::string, json>>& defaults = {});

 private:
  static bool is_float32(const json& v);

  float number(const std::string& key, const std::string& name, const json& config,
               float fallback) const;

  InitSpec read_initializer(const std::string& key, const std::string& class_name,
                            const json& config) const;

  InitSpec variance_scaling(const std::string& key, const json& config) const;

  const std::string& source_;
  size_t index_;
  std::string class_name_;
  const json& config_;
  std::set<std::string> used_;
};

}  // namespace dtrain
