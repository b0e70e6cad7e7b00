// The flags that say how to read data files (data/data_options.h), declared once for every
// command that reads them: train and task (through the flag table), eval and predict (whose
// defaults are the checkpoint's), and Python's fit.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "data/data_options.h"

namespace dtrain {

// --data_format, --compression, --image_feature, --label_feature, --label_column and
// --feature_scale, bound to the fields of *options (a scale that does not parse is refused as the
// command line is parsed). The help shows their values as the defaults, or says they come from
// `defaults_from` when it is not empty.
void add_data_option_flags(CLI::App* cmd, DataOptions* options,
                           const std::string& defaults_from = "");
// base, with each data flag given on cmd's command line taken from flags (what
// add_data_option_flags bound them to).
DataOptions given_data_options(const CLI::App& cmd, const DataOptions& flags, DataOptions base);

}  // namespace dtrain
