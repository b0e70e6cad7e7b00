#!/usr/bin/env bash
# Installs uPlot (npm uplot, pinned), the charting library of the live page that a chief's
# --metrics_port serves at / (docs/monitoring.md), into NPM_DIR (default
# ${DTRAIN_NPM_DIR:-$HOME/.cache/dtrain/npm}). The build embeds its script, style sheet and licence
# into the binary (cmake/embed_page_assets.cmake), so nothing is fetched when a page is served.
# Offline and silent but for one line when it is already there.
#
# Usage: scripts/fetch_uplot.sh [NPM_DIR]
set -euo pipefail

readonly PACKAGE_NAME="uplot"
readonly PACKAGE_VERSION="1.6.32"

npm_dir="${1:-${DTRAIN_NPM_DIR:-$HOME/.cache/dtrain/npm}}"
installed="$npm_dir/node_modules/$PACKAGE_NAME/package.json"

installed_version() {
  node -e 'process.stdout.write(require(process.argv[1]).version)' "$installed" 2>/dev/null || true
}

if [[ -f "$installed" && "$(installed_version)" == "$PACKAGE_VERSION" ]]; then
  echo "fetch_uplot.sh: $PACKAGE_NAME $PACKAGE_VERSION already in $npm_dir"
  exit 0
fi

command -v npm >/dev/null || { echo "fetch_uplot.sh: npm is not installed" >&2; exit 1; }
mkdir -p "$npm_dir"
cd "$npm_dir"
[[ -f package.json ]] || echo '{"name": "dtrain-npm-cache", "private": true}' >package.json
npm install --no-audit --no-fund --loglevel=error "$PACKAGE_NAME@$PACKAGE_VERSION" >/dev/null
test "$(installed_version)" == "$PACKAGE_VERSION" ||
  { echo "fetch_uplot.sh: $PACKAGE_NAME did not install into $npm_dir" >&2; exit 1; }
echo "fetch_uplot.sh: installed $PACKAGE_NAME $PACKAGE_VERSION into $npm_dir"
