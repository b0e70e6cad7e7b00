// The flag table (plan/flags.h) bound to CLI11: `dtrain train` and `dtrain task` declare their
// options from it, and Python's fit parses its keywords through it, so that a flag has one
// default, one parser and one check wherever it is given.
#include "plan/flag_parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/error.h"
#include "plan/data_flags.h"
#include "plan/flags.h"
#include "plan/name_suggestion.h"

namespace dtrain {
namespace {

// One option of the table bound to its field of *values.
template <typename T>
CLI::Option* add_field(CLI::App* cmd, const FlagSpec& flag, T& field) {
  const std::string name(flag.name);
  const std::string help(flag.help);
  if constexpr (std::is_same_v<T, bool>) {
    if (flag.is_switch) return cmd->add_flag(flag.negates ? "!" + name : name, field, help);
  }
  return cmd->add_option(name, field, help);
}

// cmd's flags as typed ("--learning_rate"), but those --help leaves out.
std::vector<std::string> declared_flags(const CLI::App& cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* option : cmd.get_options()) {
    if (option->get_group().empty()) continue;
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
  }
  return names;
}

std::vector<std::string> declared_subcommands(const CLI::App& cmd) {
  std::vector<std::string> names;
  for (const CLI::App* sub : cmd.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

std::string did_you_mean(const std::optional<std::string>& suggestion) {
  return suggestion ? fmt::format("; did you mean {}?", *suggestion) : "";
}

}  // namespace

std::string parse_error_message(const CLI::App& cmd, const CLI::ParseError& error) {
  const std::vector<std::string> extras = cmd.remaining();
  // A word first where a command was due: the command, mistyped ("dtrain trian --model ...").
  const std::vector<std::string> commands = declared_subcommands(cmd);
  if (!extras.empty() && !extras.front().starts_with("-") && !commands.empty() &&
      cmd.get_subcommands().empty()) {
    return fmt::format("{}: no such command{}", extras.front(),
                       did_you_mean(closest_name(extras.front(), commands)));
  }
  const auto flag = std::find_if(extras.begin(), extras.end(),
                                 [](const std::string& arg) { return arg.starts_with("-"); });
  if (flag != extras.end()) {
    const std::string name = flag->substr(0, flag->find('='));
    return fmt::format("{}: no such flag{}", name,
                       did_you_mean(closest_name(name, declared_flags(cmd))));
  }
  return error.what();
}

void add_flag_options(CLI::App* cmd, FlagValues* values) {
  for (const FlagSpec& flag : flag_table()) {
    if (std::holds_alternative<std::monostate>(flag.field)) {
      // The data flags, declared together, go under their row's heading together.
      const size_t before = cmd->get_options().size();
      add_data_option_flags(cmd, &values->data_options);
      const std::vector<CLI::Option*> options = cmd->get_options();
      for (size_t i = before; i < options.size(); ++i) options[i]->group(std::string(flag.topic));
      continue;
    }
    CLI::Option* option = std::visit(
        [&](auto field) -> CLI::Option* {
          if constexpr (std::is_same_v<decltype(field), std::monostate>) {
            return nullptr;
          } else {
            return add_field(cmd, flag, values->*field);
          }
        },
        flag.field);
    if (flag.show_default) option->capture_default_str();
    if (!flag.choices.empty())
      option->check(
          CLI::IsMember(std::vector<std::string>(flag.choices.begin(), flag.choices.end())));
    if (flag.delimiter != 0) option->delimiter(flag.delimiter);
    option->group(flag.hidden ? std::string() : std::string(flag.topic));
  }
}

// The table's flags on the command line, each with its value as typed.
std::map<std::string, std::string, std::less<>> given_flags(const CLI::App& cmd) {
  std::map<std::string, std::string, std::less<>> given;
  for (const FlagSpec& flag : flag_table()) {
    if (std::holds_alternative<std::monostate>(flag.field)) continue;
    const std::string name(flag.name);
    if (cmd.count(name) == 0) continue;
    std::string text;
    for (const std::string& part : cmd.get_option(name)->results())
      text += (text.empty() ? "" : ",") + part;
    given[name] = text;
  }
  return given;
}

RunPlan plan_from_arguments(Command command, const std::vector<std::string>& arguments) {
  FlagValues flags;
  CLI::App app(command == Command::kTask ? "task" : "train");
  add_flag_options(&app, &flags);
  // CLI11 takes the arguments last first.
  std::vector<std::string> reversed(arguments.rbegin(), arguments.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& error) {
    throw UsageError(parse_error_message(app, error));
  }
  return make_plan(command, flags, given_flags(app), arguments);
}

}  // namespace dtrain
