#!/usr/bin/env bash
# Makes this machine ready to build and run dtrain: installs the Debian packages that are missing
# (quiet when none are), configures and builds BUILD_DIR, and fetches MNIST. Safe to run again.
#
# Usage: scripts/setup.sh [--tests | --sanitize] [BUILD_DIR]
#   (default)    what training needs and no more: the dtrain binary and the Python package
#                (build/python: PYTHONPATH=build/python python3 -c "import dtrain"), Release, in build/
#   --tests      everything the suite runs, Release (default dir build): the test binaries too,
#                the test-only packages, and ONNX Runtime for the export tests
#   --sanitize   as --tests, with AddressSanitizer + UndefinedBehaviorSanitizer (default dir
#                build-asan), and the fuzz targets with clang in build-fuzz, which its ctest runs too
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=train
build_dir=build
case "${1:-}" in
  --tests) mode=tests && shift ;;
  --sanitize) mode=sanitize && build_dir=build-asan && shift ;;
  -*) echo "setup: unknown option $1 (usage: scripts/setup.sh [--tests | --sanitize] [BUILD_DIR])" >&2
    exit 2 ;;
esac
build_dir="${1:-$build_dir}"

# What building and running `dtrain train` and `import dtrain` (pybind11, numpy) need, and
# gnuplot-nox, which `dtrain plot` draws a run's charts with. ocl-icd-opencl-dev: Debian's libdnnl-dev is built
# with the OpenCL GPU runtime, so its CMake config calls find_package(OpenCL REQUIRED), and that
# package is only a Recommends, which --no-install-recommends leaves out.
readonly TRAIN_PACKAGES=(cmake ninja-build g++ pkg-config libopenblas-dev zlib1g-dev
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev libasio-dev libssl-dev libisal-dev
  libdnnl-dev ocl-icd-opencl-dev protobuf-compiler libprotobuf-dev npm ca-certificates
  pybind11-dev python3-dev python3-numpy prometheus-cpp-dev libmicrohttpd-dev gnuplot-nox)
# Intel's ipsec-mb computes the frames' GMAC tags 2.5 times faster than OpenSSL here; Debian builds
# it for amd64 only (elsewhere OpenSSL computes the same tags).
if [[ $(dpkg --print-architecture 2>/dev/null) == amd64 ]]; then
  readonly TAG_PACKAGES=(libipsec-mb-dev)
else
  readonly TAG_PACKAGES=()
fi
# What the suite needs beyond that (docs/development.md says what each is for).
readonly TEST_PACKAGES=(libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-14-dev
  iproute2 nftables procps python3-protobuf python3-crcmod dataset-fashion-mnist python3-onnx
  python3-yaml openmpi-bin slurm-wlm munge libtorch-dev python3-torch prometheus chromium)

install_missing() {
  local missing=() pkg
  for pkg in "$@"; do
    # npm may come with a Node.js that was not installed from Debian; the command is what matters.
    if [[ "$pkg" == npm ]] && command -v npm >/dev/null; then continue; fi
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  echo "setup: installing ${missing[*]}"
  local sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

# Two cores and about 1.5 GB per compiler process: two jobs are as fast as more and never swap.
# Ninja's own progress shows: one line that updates itself on a terminal, [n/N] lines in a log.
build() {
  local dir=$1
  shift
  echo "setup: building $dir${*:+ ($*)}"
  NINJA_STATUS="[%f/%t %es] " cmake --build "$dir" -j 2 "$@"
}

# Whether DIR is configured with every given cache setting (-DNAME:TYPE=VALUE).
configured_with() {
  local dir=$1 setting
  shift
  [[ -f "$dir/build.ninja" ]] || return 1
  for setting in "$@"; do
    grep -qxF "${setting#-D}" "$dir/CMakeCache.txt" || return 1
  done
}

configure() {
  local dir=$1
  shift
  configured_with "$dir" "$@" || cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
}

if [[ "$mode" == train ]]; then
  install_missing "${TRAIN_PACKAGES[@]}" "${TAG_PACKAGES[@]}"
  # uPlot, which the binary embeds for the live page of --metrics_port: before configuring.
  scripts/fetch_uplot.sh
  # Without the suite and the benchmarks configured, their packages are not needed either.
  configure "$build_dir" -DCMAKE_BUILD_TYPE:STRING=Release -DDTRAIN_SANITIZE:BOOL=OFF \
    -DDTRAIN_BUILD_TESTS:BOOL=OFF -DDTRAIN_BUILD_BENCH:BOOL=OFF
  build "$build_dir" --target dtrain dtrain_python
  test -x "$build_dir/dtrain" || { echo "setup: the build failed (see above)" >&2; exit 1; }
  scripts/fetch_mnist.sh
  exit 0
fi

install_missing "${TRAIN_PACKAGES[@]}" "${TAG_PACKAGES[@]}" "${TEST_PACKAGES[@]}"
scripts/fetch_uplot.sh

# The fuzz targets (docs/testing.md, "Fuzzing"): libFuzzer needs clang, so they are a build of
# their own, a few library sources and nine small programs, registered as tests of the sanitizer
# build.
fuzz_dir=""
if [[ "$mode" == sanitize ]]; then
  fuzz_dir="$PWD/build-fuzz"
  if [[ ! -f "$fuzz_dir/build.ninja" ]]; then
    cmake -S . -B "$fuzz_dir" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DDTRAIN_FUZZ=ON >/dev/null
  fi
  build "$fuzz_dir"
  for source in fuzz/*_fuzzer.cc; do
    target=$(basename "$source" .cc)
    test -x "$fuzz_dir/$target" || { echo "setup: the fuzz build failed (see above)" >&2; exit 1; }
  done
  # The micro-benchmarks are not part of the suite.
  configure "$build_dir" -DCMAKE_BUILD_TYPE:STRING=Release -DDTRAIN_SANITIZE:BOOL=ON \
    -DDTRAIN_BUILD_TESTS:BOOL=ON -DDTRAIN_BUILD_BENCH:BOOL=OFF -DDTRAIN_FUZZ_DIR:PATH="$fuzz_dir"
else
  configure "$build_dir" -DCMAKE_BUILD_TYPE:STRING=Release -DDTRAIN_SANITIZE:BOOL=OFF \
    -DDTRAIN_BUILD_TESTS:BOOL=ON -DDTRAIN_BUILD_BENCH:BOOL=ON -DDTRAIN_FUZZ_DIR:PATH=
fi
build "$build_dir"
test -x "$build_dir/dtrain" || { echo "setup: the build failed (see above)" >&2; exit 1; }

scripts/fetch_mnist.sh
# ONNX Runtime, which the export tests run dtrain's ONNX models on (tests/export/).
scripts/fetch_onnxruntime.sh
