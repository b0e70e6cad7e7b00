#!/usr/bin/env bash
# The README's first command: set up (packages, the dtrain binary alone, MNIST), then train the
# default job (mnist_inference on MNIST). Extra arguments go to `dtrain train`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh
exec build/dtrain train "$@"
