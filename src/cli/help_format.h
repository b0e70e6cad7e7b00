// --help as a user reads it: each option's value as a word (TEXT, INT, FLOAT) with its default,
// none of CLI11's internals (a transformer's mapping, a validator's set, "Excludes:"); the help
// text says what the values are. Set on the app before its subcommands, which inherit it.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace dtrain::cli {

class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* option, bool is_positional) const override;
  std::string make_option_opts(const CLI::Option* option) const override;
};

}  // namespace dtrain::cli
