// "Did you mean --learning_rate?": the known name closest to one the user typed, for the refusal
// of an unknown flag or subcommand. Pure logic over strings; no CLI11.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace dtrain {

// The entry of `known` (flags as "--name", or subcommands) that `given` most likely meant, or
// nullopt when none is close. Names compare without their leading dashes, in any case, with '-'
// and '_' alike, so "--train-steps" and "--Batch_Size" find "--train_steps" and "--batch_size".
// In order: that spelling; another framework's name for it ("--lr", "--max_steps", "--model_dir");
// the only name that begins with what was given (3 characters at least); the nearest by edit
// distance (a typo: at most 1 edit in a name of up to 4 characters, 2 in a longer one), the first
// of equals in `known`'s order.
std::optional<std::string> closest_name(std::string_view given, std::span<const std::string> known);

}  // namespace dtrain
