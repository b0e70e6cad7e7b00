// The flag table (plan/flags.h) as CLI11 options, and a run plan from arguments without a command
// line: what `dtrain train`/`dtrain task` parse argv with, and what Python's fit parses its
// keywords with.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "plan/flag_values.h"
#include "plan/run_plan.h"

namespace dtrain {

// Declares every flag of the table on cmd, bound to its field of *values (the data flags to
// values->data_options), with its help, default, choices and delimiter.
void add_flag_options(CLI::App* cmd, FlagValues* values);
// The table's flags given on cmd's command line, each with its value as typed.
std::map<std::string, std::string, std::less<>> given_flags(const CLI::App& cmd);

// The message for error, thrown while parsing cmd's command line (cmd: a subcommand that was
// chosen, or the app itself): for a flag or subcommand nobody declared, it names it and, where a
// declared one is close (plan/name_suggestion.h), asks whether that was meant:
// "--lr: no such flag; did you mean --learning_rate?". Otherwise CLI11's own words.
std::string parse_error_message(const CLI::App& cmd, const CLI::ParseError& error);

// The plan of `dtrain <command>` with these arguments ("--batch_size", "50", ...): parsed as the
// command line is, then make_plan. Throws UsageError naming the flag for an unknown flag, a value
// that does not parse or is not one of its choices, and whatever make_plan refuses.
RunPlan plan_from_arguments(Command command, const std::vector<std::string>& arguments);

}  // namespace dtrain
