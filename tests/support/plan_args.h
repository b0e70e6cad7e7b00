// Test support: a run plan from command-line-like arguments ("--batch_size", "0", ...), set through
// the flag table's fields as the CLI sets them, without CLI11.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cluster/launch_env.h"
#include "plan/flags.h"
#include "plan/run_plan.h"

namespace dtrain::testing {

template <typename T>
T parse_one(const std::string& text) {
  if constexpr (std::is_same_v<T, int>) return std::stoi(text);
  if constexpr (std::is_same_v<T, int64_t>) return std::stoll(text);
  if constexpr (std::is_same_v<T, uint64_t>) return std::stoull(text);
  if constexpr (std::is_same_v<T, float>) return std::stof(text);
  if constexpr (std::is_same_v<T, double>) return std::stod(text);
  if constexpr (std::is_same_v<T, std::string>) return text;
}

template <typename T>
void set_field(T& field, const std::string& text) {
  if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::vector<float>>) {
    field.clear();
    size_t begin = 0;
    while (begin <= text.size()) {
      const size_t end = std::min(text.find(',', begin), text.size());
      field.push_back(parse_one<typename T::value_type>(text.substr(begin, end - begin)));
      begin = end + 1;
    }
  } else {
    field = parse_one<T>(text);
  }
}

inline FlagValues test_defaults() {
  FlagValues flags;
  flags.threads = 1;  // as --threads 1: the same on every machine
  return flags;
}

// `args` as `dtrain <command>` would take them: every flag is the table's, a switch takes no
// value. Throws std::invalid_argument for a flag the table does not have.
inline RunPlan plan_of(Command command, const std::vector<std::string>& args) {
  FlagValues flags = test_defaults();
  std::map<std::string, std::string, std::less<>> given;
  for (size_t i = 0; i < args.size(); ++i) {
    const FlagSpec* flag = find_flag(args[i]);
    if (flag == nullptr) throw std::invalid_argument("no such flag: " + args[i]);
    if (flag->is_switch) {
      flags.*std::get<FieldOf<bool>>(flag->field) = !flag->negates;
      given[args[i]] = "";
      continue;
    }
    const std::string text = args.at(++i);
    std::visit(
        [&](auto field) {
          if constexpr (!std::is_same_v<decltype(field), std::monostate> &&
                        !std::is_same_v<decltype(field), FieldOf<bool>>) {
            set_field(flags.*field, text);
          }
        },
        flag->field);
    given[args[i - 1]] = text;
  }
  return make_plan(command, flags, std::move(given), args);
}

inline RunPlan plan_of(const std::vector<std::string>& args) {
  return plan_of(Command::kTrain, args);
}

// An environment of exactly these variables.
inline EnvLookup env_of(std::map<std::string, std::string, std::less<>> variables) {
  return [variables = std::move(variables)](std::string_view name) -> std::optional<std::string> {
    const auto it = variables.find(name);
    if (it == variables.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace dtrain::testing
