#!/usr/bin/env bash
# Builds ps-lite (dmlc/ps-lite at 15b8adf) in Release against Debian's libzmq and protobuf, then
# the anchor driver pslite_bench.cc against it, into OUT_DIR: OUT_DIR/pslite_bench is the binary
# that run.sh starts.
set -euo pipefail

readonly kRepoUrl=https://github.com/dmlc/ps-lite
readonly kCommit=15b8adf

usage() {
  cat <<'EOF'
usage: bench/anchors/pslite/build.sh [SRC] [OUT_DIR]
  SRC      ps-lite sources: a git repository (work tree or bare git dir, e.g.
           /work/.mirror/dmlc+ps-lite/repo), cloned and checked out at 15b8adf, or a plain
           directory used as it is. Default: clone https://github.com/dmlc/ps-lite at 15b8adf.
  OUT_DIR  where the copy of the sources, ps-lite's build and pslite_bench go
           (default: build/anchors/pslite under the repository root)
Needs the Debian packages g++, cmake, make, git, libzmq3-dev, libprotobuf-dev, protobuf-compiler.
EOF
}

case "${1:-}" in -h | --help) usage; exit 0 ;; -*) usage >&2; exit 2 ;; esac
if (($# > 2)); then usage >&2; exit 2; fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$here/../../.." && pwd)
src_arg=${1:-}
out_dir=${2:-$repo_root/build/anchors/pslite}

# Named by package, so the message says what to install; checked before anything is built so
# that a missing libzmq3-dev cannot send ps-lite's CMake off to download its own ZeroMQ.
missing=()
for package in g++ cmake make git libzmq3-dev libprotobuf-dev protobuf-compiler; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then missing+=("$package"); fi
done
if ((${#missing[@]})); then
  echo "build.sh: missing Debian package(s): ${missing[*]} (apt-get install ${missing[*]})" >&2
  exit 1
fi

mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)

# The sources are always copied into OUT_DIR/src: the build writes nothing into SRC.
src=$out_dir/src
rm -rf "$src"
if [[ -z "$src_arg" ]]; then
  echo "build.sh: cloning $kRepoUrl at $kCommit"
  git clone --quiet "$kRepoUrl" "$src"
  git -C "$src" checkout --quiet "$kCommit"
elif git -C "$src_arg" rev-parse --git-dir >/dev/null 2>&1; then
  git clone --quiet "$src_arg" "$src"
  if ! git -C "$src" checkout --quiet "$kCommit" 2>/dev/null; then
    echo "build.sh: $src_arg does not hold ps-lite commit $kCommit" >&2
    exit 1
  fi
elif [[ -f "$src_arg/include/ps/ps.h" ]]; then
  echo "build.sh: $src_arg is not a git repository; building it as it is (not checked at $kCommit)"
  cp -a "$src_arg" "$src"
else
  echo "build.sh: $src_arg is neither a git repository nor a ps-lite tree (no include/ps/ps.h)" >&2
  exit 1
fi
if [[ -d "$src/.git" ]]; then
  echo "build.sh: ps-lite $(git -C "$src" log -1 --format='%h %s')"
fi

# ps-lite's CMake build, not its Makefile: the Makefile always downloads and builds its own
# protobuf 3.5.1 and ZeroMQ 4.1.4 (make/deps.mk), while CMakeLists.txt uses find_package for
# both. It builds unpatched with Debian 12's g++ 12.2, CMake 3.25, protobuf 3.21 and libzmq 4.3.4
# (only a deprecation warning for MessageLite::ByteSize), so no patch is applied. Release is
# -O3 -DNDEBUG. FETCHCONTENT_FULLY_DISCONNECTED stops the fallback that fetches ZeroMQ 4.3.2
# when find_package(ZMQ) fails, so a broken libzmq install fails the build instead of being
# replaced; the check below makes sure the system library is the one found.
cmake -S "$src" -B "$out_dir/pslite-build" -DCMAKE_BUILD_TYPE=Release \
  -DFETCHCONTENT_FULLY_DISCONNECTED=ON >"$out_dir/cmake-configure.log" 2>&1 || {
  cat "$out_dir/cmake-configure.log" >&2
  echo "build.sh: configuring ps-lite failed (log above)" >&2
  exit 1
}
zmq_library=$(sed -n 's/^ZMQ_LIBRARY:FILEPATH=//p' "$out_dir/pslite-build/CMakeCache.txt")
if [[ "$zmq_library" != /usr/* ]]; then
  echo "build.sh: ps-lite's CMake did not find Debian's libzmq (ZMQ_LIBRARY='$zmq_library')" >&2
  exit 1
fi
# Only the library: the upstream tests are not needed for the anchor.
cmake --build "$out_dir/pslite-build" --target pslite -j "$(nproc)"

# The driver in the repository's C++20, -O3 like the library; ps-lite's headers as system
# headers so that their own warnings do not drown the driver's. The public headers never
# include the generated meta.pb.h, so only the library needs it.
g++ -std=c++20 -O3 -DNDEBUG -Wall -Wextra -isystem "$src/include" \
  "$here/pslite_bench.cc" "$out_dir/pslite-build/libpslite.a" \
  -lprotobuf -lzmq -pthread -o "$out_dir/pslite_bench"
echo "build.sh: built $out_dir/pslite_bench"
