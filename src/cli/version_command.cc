// `dtrain version` and `dtrain --version`: which dtrain this is (base/version.h).
#include <iostream>

#include "base/version.h"
#include "cli/commands.h"

namespace dtrain::cli {

void add_version_command(CLI::App& app, Action& action) {
  app.set_version_flag("--version", version_line(), "Print dtrain's version and commit, and exit");
  CLI::App* cmd = app.add_subcommand("version", "Print dtrain's version and commit");
  cmd->callback([&action] {
    action = [] {
      std::cout << version_line() << "\n";
      return 0;
    };
  });
}

}  // namespace dtrain::cli
