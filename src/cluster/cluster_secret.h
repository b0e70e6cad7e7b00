// The cluster secret: what every task of a cluster proves it holds in each handshake.
#pragma once

#include <string>

#include "cluster/launch_env.h"

namespace dtrain {

// The contents of secret_file (one trailing newline dropped) when given, else $DTRAIN_SECRET from
// env; empty when neither is set. Throws UsageError for an unreadable or empty file, a file its
// group or others may read or write, or a secret shorter than 16 bytes (naming where it came
// from).
std::string cluster_secret(const std::string& secret_file, const EnvLookup& env = process_env());
// A fresh random secret for one local cluster run (64 hex digits).
std::string new_cluster_secret();

}  // namespace dtrain
