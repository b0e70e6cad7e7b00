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
// cluster_secret(), refusing none at all: the `world_size` ranks that `launcher` ("torchrun
// (RANK, WORLD_SIZE)") starts need the same one. `file_option` is how this door takes a file
// ("--secret_file FILE", "secret_file=PATH"), for the message's hint.
std::string required_cluster_secret(const std::string& secret_file, const EnvLookup& env,
                                    int world_size, const std::string& launcher,
                                    const std::string& file_option);
// A fresh random secret for one local cluster run (64 hex digits).
std::string new_cluster_secret();

}  // namespace dtrain
