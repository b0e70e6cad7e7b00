#!/usr/bin/env bash
# Installs ONNX Runtime for Node.js (npm onnxruntime-node, pinned) into NPM_DIR (default
# ${DTRAIN_NPM_DIR:-$HOME/.cache/dtrain/npm}): the independent runtime that the ONNX export tests
# (tests/export/) run dtrain's exported models on. Offline and silent but for one line when it is
# already there. ONNXRUNTIME_NODE_INSTALL=skip: the CPU build inside the package is all we need;
# its install script would otherwise try to download GPU libraries.
#
# Usage: scripts/fetch_onnxruntime.sh [NPM_DIR]
set -euo pipefail

readonly PACKAGE_NAME="onnxruntime-node"
readonly PACKAGE_VERSION="1.30.0"

npm_dir="${1:-${DTRAIN_NPM_DIR:-$HOME/.cache/dtrain/npm}}"
installed="$npm_dir/node_modules/$PACKAGE_NAME/package.json"

installed_version() {
  node -e 'process.stdout.write(require(process.argv[1]).version)' "$installed" 2>/dev/null || true
}

if [[ -f "$installed" && "$(installed_version)" == "$PACKAGE_VERSION" ]]; then
  echo "fetch_onnxruntime.sh: $PACKAGE_NAME $PACKAGE_VERSION already in $npm_dir"
  exit 0
fi

command -v npm >/dev/null || { echo "fetch_onnxruntime.sh: npm is not installed" >&2; exit 1; }
mkdir -p "$npm_dir"
cd "$npm_dir"
[[ -f package.json ]] || echo '{"name": "dtrain-npm-cache", "private": true}' >package.json
ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund --loglevel=error \
  "$PACKAGE_NAME@$PACKAGE_VERSION" >/dev/null
test "$(installed_version)" == "$PACKAGE_VERSION" ||
  { echo "fetch_onnxruntime.sh: $PACKAGE_NAME did not install into $npm_dir" >&2; exit 1; }
echo "fetch_onnxruntime.sh: installed $PACKAGE_NAME $PACKAGE_VERSION into $npm_dir"
