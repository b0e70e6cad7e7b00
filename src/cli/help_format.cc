// What an option's left column shows: " INT=100", " TEXT ...", or nothing for a switch.
#include "cli/help_format.h"

namespace dtrain::cli {

// "-h,--help": CLI11's own would append a negated switch's value ("--no_progress{false}").
std::string HelpFormatter::make_option_name(const CLI::Option* option, bool is_positional) const {
  if (is_positional) return option->get_name(true, false);
  std::string names;
  for (const std::string& name : option->get_snames()) names += (names.empty() ? "-" : ",-") + name;
  for (const std::string& name : option->get_lnames())
    names += (names.empty() ? "--" : ",--") + name;
  return names;
}

std::string HelpFormatter::make_option_opts(const CLI::Option* option) const {
  if (!option->get_option_text().empty()) return " " + option->get_option_text();
  // A switch: no type to name.
  if (option->get_type_size() == 0 || option->get_type_name().empty()) return "";
  // CLI11 appends each validator's and transformer's description to the type's name
  // ("ENUM:value in {auto->0,...} OR {0,3,1,2}", "TEXT:{local,towers}"): the first word alone.
  std::string label = option->get_type_name();
  label = label.substr(0, label.find(':'));
  if (label == "ENUM") label = "TEXT";
  std::string text = " " + label;
  const std::string& default_text = option->get_default_str();
  if (!default_text.empty() && default_text != "[]" && default_text.front() != '{')
    text += "=" + default_text;
  if (option->get_expected_max() == CLI::detail::expected_max_vector_size) text += " ...";
  return text;
}

}  // namespace dtrain::cli
