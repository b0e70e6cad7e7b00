#!/usr/bin/env bash
# Makes this machine ready to build and run dtrain: installs the Debian packages that are missing
# (quiet when none are), configures and builds BUILD_DIR, and fetches MNIST. Safe to run again.
#
# Usage: scripts/setup.sh [--sanitize] [BUILD_DIR]
#   --sanitize   build with AddressSanitizer + UndefinedBehaviorSanitizer (default dir build-asan),
#                and the fuzz targets with clang in build-fuzz, which BUILD_DIR's ctest runs too
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
  libssl-dev libisal-dev libdnnl-dev npm ca-certificates clang libclang-rt-14-dev iproute2 nftables
  protobuf-compiler libprotobuf-dev python3-protobuf python3-crcmod dataset-fashion-mnist
  python3-onnx python3-yaml openmpi-bin slurm-wlm munge)

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

# Two cores and about 1.5 GB per compiler process: two jobs are as fast as more and never swap.
build() {
  cmake --build "$1" -j 2 | grep -vE '^\[[0-9]+/[0-9]+\] ' || true
}

# The fuzz targets (README, "Fuzzing"): libFuzzer needs clang, so they are a build of their own,
# a few library sources and five small programs, registered as tests of the sanitizer build.
fuzz_dir=""
if [[ "$sanitize" == ON ]]; then
  fuzz_dir="$PWD/build-fuzz"
  if [[ ! -f "$fuzz_dir/build.ninja" ]]; then
    cmake -S . -B "$fuzz_dir" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DDTRAIN_FUZZ=ON >/dev/null
  fi
  build "$fuzz_dir"
  for source in fuzz/*_fuzzer.cc; do
    target=$(basename "$source" .cc)
    test -x "$fuzz_dir/$target" || { echo "setup: the fuzz build failed (see above)" >&2; exit 1; }
  done
fi

# Configured again when the fuzz build it runs has changed (or it predates DTRAIN_FUZZ_DIR).
if [[ ! -f "$build_dir/build.ninja" ]] ||
  ! grep -qxF "DTRAIN_FUZZ_DIR:PATH=$fuzz_dir" "$build_dir/CMakeCache.txt"; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDTRAIN_SANITIZE="$sanitize" \
    -DDTRAIN_FUZZ_DIR:PATH="$fuzz_dir" >/dev/null
fi
build "$build_dir"
test -x "$build_dir/dtrain" || { echo "setup: the build failed (see above)" >&2; exit 1; }

scripts/fetch_mnist.sh
# ONNX Runtime, which the export tests run dtrain's ONNX models on (tests/export/).
scripts/fetch_onnxruntime.sh
