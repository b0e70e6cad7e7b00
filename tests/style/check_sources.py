#!/usr/bin/python3
"""Keeps three of the project's rules in the gate (STYLE.md 30, 13, 35): no unit over 700 lines, no
class of src/train/ over 300, and every C++ file as clang-format writes it.

Usage: /usr/bin/python3 tests/style/check_sources.py REPOSITORY_ROOT units|classes|format

units:  a unit is a header and its source of one name in one folder (foo.h + foo.cc) under src/,
        python/, tests/, fuzz/ and bench/; a Python file is a unit of its own. Each over 700 lines
        is printed as 'PATH: N lines (.h + .cc)' and the exit status is 1.
classes: a class of src/train/ counts the lines of its definition and of every member function
        defined outside it (`Name::member(...) {...}` in any .h or .cc of that folder); each over
        300 is printed as 'NAME: N lines (FILES)' and the exit status is 1.
format: every .h and .cc file there run through `clang-format --dry-run --Werror` with the
        repository's .clang-format; each file it would change is printed and the exit status is 1.
        Exit 77 (skipped) when clang-format is not installed.
Standard library only.
"""

import collections
import os
import re
import shutil
import subprocess
import sys

FOLDERS = ("src", "python", "tests", "fuzz", "bench")
LIMIT = 700
CLASS_FOLDER = os.path.join("src", "train")
CLASS_LIMIT = 300


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


def code_only(text):
    """The text with comments, string and character literals blanked (newlines kept), so that
    braces and names are the code's own."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("\n" * text.count("\n", i, end))
            i = end
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            open_paren = text.find("(", i + 2)
            delimiter = ")" + text[i + 2:open_paren] + '"'
            end = text.find(delimiter, open_paren)
            end = n if end < 0 else end + len(delimiter)
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c in "\"'" and not (c == "'" and i > 0 and text[i - 1].isalnum()):
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def block_end(code, open_brace):
    """The index just past the brace that closes the one at open_brace."""
    depth = 0
    for i in range(open_brace, len(code)):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(code)


def lines_between(code, begin, end):
    return code.count("\n", begin, end) + 1


CLASS_HEAD = re.compile(r"^\s*(?:class|struct)\s+(?:\[\[\w+\]\]\s*)?(\w+)(?:\s+final)?\s*(?::[^;{]*)?\{",
                        re.MULTILINE)
MEMBER_HEAD = re.compile(r"\b(\w+)::(~?\w+|operator\W+)\s*\(")


def class_lines(root):
    """Each class of CLASS_FOLDER: its lines, and the files they are in."""
    sizes = collections.Counter()
    files = collections.defaultdict(set)
    folder = os.path.join(root, CLASS_FOLDER)
    codes = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith((".h", ".cc")):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                codes[name] = code_only(f.read())
    classes = set()
    for name, code in codes.items():
        for match in CLASS_HEAD.finditer(code):
            end = block_end(code, match.end() - 1)
            classes.add(match.group(1))
            sizes[match.group(1)] += lines_between(code, match.start(), end)
            files[match.group(1)].add(name)
    for name, code in codes.items():
        for match in MEMBER_HEAD.finditer(code):
            owner = match.group(1)
            if owner not in classes:
                continue
            # A definition: its parameter list closes, then (after qualifiers and an initialiser
            # list) a body opens before any ';'.
            depth, i = 0, match.end() - 1
            while i < len(code):
                depth += {"(": 1, ")": -1}.get(code[i], 0)
                i += 1
                if depth == 0:
                    break
            body = i
            while body < len(code) and code[body] not in "{;":
                body += 1
            if body >= len(code) or code[body] == ";":
                continue
            # An initialiser list's braces (member{value}) come before the body's.
            while True:
                end = block_end(code, body)
                after = code[end:end + 200].lstrip()
                if after.startswith(",") or (after.startswith("{") and code[body - 1].isalnum()):
                    nxt = code.find("{", end)
                    if nxt < 0:
                        break
                    body = nxt
                    continue
                break
            line_start = code.rfind("\n", 0, match.start()) + 1
            sizes[owner] += lines_between(code, line_start, end)
            files[owner].add(name)
    return sizes, files


def check_classes(root):
    sizes, files = class_lines(root)
    over = sorted((lines, name) for name, lines in sizes.items() if lines > CLASS_LIMIT)
    for lines, name in reversed(over):
        print(f"{name}: {lines} lines ({', '.join(sorted(files[name]))}), over {CLASS_LIMIT}: "
              "split it by responsibility")
    if not over:
        print(f"check_sources: {len(sizes)} classes in {CLASS_FOLDER}, none over {CLASS_LIMIT} "
              "lines")
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
    checks = {"units": check_units, "classes": check_classes, "format": check_format}
    if len(sys.argv) != 3 or sys.argv[2] not in checks:
        print(__doc__, file=sys.stderr)
        return 2
    return checks[sys.argv[2]](sys.argv[1])


if __name__ == "__main__":
    sys.exit(main())
