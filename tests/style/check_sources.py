#!/usr/bin/python3
"""Keeps two of the project's rules in the gate (STYLE.md 30, 13, 35): no unit over 700 lines, and
every C++ file as clang-format writes it.

Usage: /usr/bin/python3 tests/style/check_sources.py REPOSITORY_ROOT units|format

units:  a unit is a header and its source of one name in one folder (foo.h + foo.cc) under src/,
        python/, tests/, fuzz/ and bench/; a Python file is a unit of its own. Each over 700 lines
        is printed as 'PATH: N lines (.h + .cc)' and the exit status is 1.
format: every .h and .cc file there run through `clang-format --dry-run --Werror` with the
        repository's .clang-format; each file it would change is printed and the exit status is 1.
        Exit 77 (skipped) when clang-format is not installed.
Standard library only.
"""

import collections
import os
import shutil
import subprocess
import sys

FOLDERS = ("src", "python", "tests", "fuzz", "bench")
LIMIT = 700


def sources(root, extensions):
    for folder in FOLDERS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith(extensions):
                    yield os.path.join(dirpath, name)


def line_count(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def check_units(root):
    units = collections.Counter()
    for path in sources(root, (".h", ".cc", ".py")):
        stem = path if path.endswith(".py") else os.path.splitext(path)[0]
        units[os.path.relpath(stem, root)] += line_count(path)
    over = sorted((unit, lines) for unit, lines in units.items() if lines > LIMIT)
    for unit, lines in over:
        kind = "" if unit.endswith(".py") else " (.h + .cc)"
        print(f"{unit}: {lines} lines{kind}, over {LIMIT}: split it by responsibility")
    if not over:
        print(f"check_sources: {len(units)} units, none over {LIMIT} lines")
    return 1 if over else 0


def check_format(root):
    tool = shutil.which("clang-format")
    if tool is None:
        print("check_sources: clang-format is not installed (Debian package clang-format)")
        return 77
    files = list(sources(root, (".h", ".cc")))
    unformatted = []
    for start in range(0, len(files), 100):
        batch = files[start:start + 100]
        result = subprocess.run([tool, "--dry-run", "--Werror", "--style=file", *batch],
                                cwd=root, capture_output=True, text=True)
        if result.returncode != 0:
            for path in batch:
                one = subprocess.run([tool, "--dry-run", "--Werror", "--style=file", path],
                                     cwd=root, capture_output=True, text=True)
                if one.returncode != 0:
                    unformatted.append(os.path.relpath(path, root))
    for path in unformatted:
        print(f"{path}: not as clang-format writes it (clang-format -i {path})")
    if not unformatted:
        print(f"check_sources: {len(files)} files as clang-format writes them")
    return 1 if unformatted else 0


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("units", "format"):
        print(__doc__, file=sys.stderr)
        return 2
    root = sys.argv[1]
    return check_units(root) if sys.argv[2] == "units" else check_format(root)


if __name__ == "__main__":
    sys.exit(main())
