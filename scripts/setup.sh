#!/usr/bin/env bash
# Makes this machine ready to build and run dtrain: installs the Debian packages that are missing
# (quiet when none are), configures and builds BUILD_DIR, and fetches MNIST. Safe to run again.
#
# Usage: scripts/setup.sh [--sanitize] [BUILD_DIR]
#   --sanitize   build with AddressSanitizer + UndefinedBehaviorSanitizer (default dir build-asan)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

sanitize=OFF
build_dir=build
if [[ "${1:-}" == "--sanitize" ]]; then
  sanitize=ON
  build_dir=build-asan
  shift
fi
build_dir="${1:-$build_dir}"

readonly PACKAGES=(cmake ninja-build g++ pkg-config libopenblas-dev zlib1g-dev nlohmann-json3-dev
  libcli11-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev libasio-dev
  libssl-dev libisal-dev npm ca-certificates)

missing=()
for pkg in "${PACKAGES[@]}"; do
  # npm may come with a Node.js that was not installed from Debian; the command is what matters.
  if [[ "$pkg" == npm ]] && command -v npm >/dev/null; then continue; fi
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

if [[ ! -f "$build_dir/build.ninja" ]]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDTRAIN_SANITIZE="$sanitize" >/dev/null
fi
# Two cores and about 1.5 GB per compiler process: two jobs are as fast as more and never swap.
cmake --build "$build_dir" -j 2 | grep -vE '^\[[0-9]+/[0-9]+\] ' || true
test -x "$build_dir/dtrain" || { echo "setup: the build failed (see above)" >&2; exit 1; }

scripts/fetch_mnist.sh
