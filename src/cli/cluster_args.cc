// The command line as main() received it, which the local launcher passes on to its tasks.
#include "cli/commands.h"

namespace dtrain::cli {
namespace {

std::vector<std::string>& command_line() {
  static std::vector<std::string> args;
  return args;
}

}  // namespace

void set_command_line(int argc, char** argv) { command_line().assign(argv, argv + argc); }

std::vector<std::string> train_arguments() {
  const std::vector<std::string>& args = command_line();
  // argv[0] is the binary, argv[1] the subcommand.
  return args.size() > 2 ? std::vector<std::string>(args.begin() + 2, args.end())
                         : std::vector<std::string>{};
}

}  // namespace dtrain::cli
