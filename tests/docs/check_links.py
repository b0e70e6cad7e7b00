#!/usr/bin/python3
"""Checks the relative links of the documentation: README.md and docs/**/*.md.

Usage: /usr/bin/python3 tests/docs/check_links.py REPOSITORY_ROOT

Every markdown link and image whose target is not http(s) or mailto must name a file or folder
that exists, relative to the file that links to it (a leading '/' is the repository's root), inside
the repository; an '#anchor' must be a heading of the target markdown file (or of the linking file,
for '#anchor' alone) as GitHub spells it: the heading's text, lowercased, every character that is
not a letter, a digit, a space, '-' or '_' removed, spaces turned into '-', and '-1', '-2', ... after
the second, third, ... heading of the same name. Links inside fenced code blocks, code spans and
HTML comments are not links and are ignored.

Prints each broken link as FILE:LINE: LINK: reason and exits 1 if there is any; otherwise prints
'check_links: N links OK' and exits 0. Standard library only.
"""

import os
import re
import sys
import urllib.parse

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
HTML_ANCHOR = re.compile(r"<a\s[^>]*?\b(?:name|id)\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
HTML_LINK = re.compile(r"<(?:a|img)\s[^>]*?\b(?:href|src)\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
# The target of an inline link or image: what follows '](' up to the matching ')', with an
# optional title. Nested link texts ([![alt](img)](target)) give one match per target.
INLINE_TARGET = re.compile(
    r"\]\(\s*(<[^<>\n]*>|(?:[^()\s]|\([^()\s]*\))*)"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^<>]*>|\S+)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
EXTERNAL = re.compile(r"^(?:https?|mailto):", re.IGNORECASE)
GITHUB_LINE_ANCHOR = re.compile(r"^L\d+(?:-L\d+)?$")


def visible_lines(text):
    """Yields (line number, line) for the lines outside fenced code blocks, with HTML comments
    blanked out."""
    fence = None
    in_comment = False
    for number, line in enumerate(text.split("\n"), start=1):
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = None
            continue
        if not in_comment:
            match = FENCE.match(line)
            if match:
                fence = match.group(1)
                continue
        out = []
        rest = line
        while rest:
            if in_comment:
                end = rest.find("-->")
                if end < 0:
                    rest = ""
                else:
                    rest = rest[end + 3:]
                    in_comment = False
            else:
                start = rest.find("<!--")
                if start < 0:
                    out.append(rest)
                    rest = ""
                else:
                    out.append(rest[:start])
                    rest = rest[start + 4:]
                    in_comment = True
        yield number, "".join(out)


def heading_text(raw):
    """The text GitHub renders for a heading's markdown."""
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", raw)        # images have no text
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)    # links: their text
    text = re.sub(r"\[([^\]]*)\]\[[^\]]*\]", r"\1", text)   # reference links
    text = re.sub(r"<[^>]+>", "", text)                     # HTML tags
    return text


def slug(text):
    text = heading_text(text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(path, cache={}):
    """The anchors GitHub gives the headings of a markdown file, duplicates numbered."""
    if path in cache:
        return cache[path]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    anchors = set()
    occurrences = {}

    def add(name):
        result = original = slug(name)
        while result in occurrences:
            occurrences[original] += 1
            result = f"{original}-{occurrences[original]}"
        occurrences[result] = 0
        anchors.add(result)

    previous = ""
    for _, line in visible_lines(text):
        match = ATX_HEADING.match(line)
        if match:
            add(match.group(2) or "")
            previous = ""
            continue
        underline = SETEXT_UNDERLINE.match(line)
        if underline and previous.strip() and not previous.lstrip().startswith(("|", "-", "*", ">")):
            add(previous.strip())  # a setext heading: the paragraph line above its underline
            previous = ""
            continue
        for name in HTML_ANCHOR.findall(line):
            anchors.add(name)
        previous = line
    cache[path] = anchors
    return anchors


def links_of(text):
    """Yields (line number, link target) for every link, image and reference definition."""
    for number, line in visible_lines(text):
        line = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
        for match in INLINE_TARGET.finditer(line):
            yield number, match.group(1)
        match = REFERENCE_DEFINITION.match(line)
        if match:
            yield number, match.group(1)
        for target in HTML_LINK.findall(line):
            yield number, target


def check(root, path):
    """Returns (links checked, [(line, link, reason)])."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    checked = 0
    broken = []
    for number, link in links_of(text):
        target = link[1:-1] if link.startswith("<") and link.endswith(">") else link
        if EXTERNAL.match(target):
            continue
        checked += 1
        if not target:
            broken.append((number, link, "empty target"))
            continue
        if SCHEME.match(target):
            broken.append((number, link, "not a relative link, nor http(s) or mailto"))
            continue
        file_part, _, anchor = target.partition("#")
        file_part = urllib.parse.unquote(file_part.split("?", 1)[0])
        anchor = urllib.parse.unquote(anchor)
        if file_part:
            base = root if file_part.startswith("/") else os.path.dirname(path)
            resolved = os.path.normpath(os.path.join(base, file_part.lstrip("/")))
        else:
            resolved = path
        if os.path.commonpath([os.path.realpath(root), os.path.realpath(resolved)]) != \
                os.path.realpath(root):
            broken.append((number, link, "outside the repository"))
            continue
        if not os.path.exists(resolved):
            broken.append((number, link, f"no such file: {os.path.relpath(resolved, root)}"))
            continue
        if not anchor:
            continue
        if os.path.isdir(resolved):
            broken.append((number, link, "an anchor on a folder"))
        elif resolved.lower().endswith((".md", ".markdown")):
            if anchor not in anchors_of(resolved):
                broken.append((number, link, f"no heading #{anchor} in "
                                             f"{os.path.relpath(resolved, root)}"))
        elif not GITHUB_LINE_ANCHOR.match(anchor):
            broken.append((number, link, "an anchor on a file that is not markdown"))
    return checked, broken


def documentation_files(root):
    files = []
    readme = os.path.join(root, "README.md")
    if os.path.isfile(readme):
        files.append(readme)
    for folder, subfolders, names in os.walk(os.path.join(root, "docs")):
        subfolders.sort()
        files.extend(os.path.join(folder, name) for name in sorted(names) if name.endswith(".md"))
    return files


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print("usage: check_links.py REPOSITORY_ROOT", file=sys.stderr)
        return 2
    root = os.path.abspath(argv[1])
    files = documentation_files(root)
    if not files:
        print(f"check_links: no README.md or docs/*.md under {root}", file=sys.stderr)
        return 1
    total = 0
    failures = 0
    for path in files:
        checked, broken = check(root, path)
        total += checked
        for number, link, reason in broken:
            print(f"{os.path.relpath(path, root)}:{number}: {link}: {reason}")
            failures += 1
    if failures:
        print(f"check_links: {failures} of {total} links broken", file=sys.stderr)
        return 1
    print(f"check_links: {total} links OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
