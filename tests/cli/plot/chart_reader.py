#!/usr/bin/env python3
"""The tests' independent reader of what `dtrain plot` writes and reads, with no dtrain code:
gnuplot's SVG charts through Python's xml, PNG files through zlib and struct, and metrics.jsonl
through Python's json, by the rules docs/training.md states for the plot.

  chart_reader.py svg FILE              {"width", "height", "series": [{"title", "legend",
                                         "points": [[x, y], ...], "marks"}]}
  chart_reader.py png FILE [R,G,B ...]  {"width", "height", "pixels": {"R,G,B": count},
                                         "columns": {"R,G,B": columns that have the colour}}
  chart_reader.py jsonl FILE SCALAR     {"points": [[step, value], ...]}

Exit code 1 and one line on stderr when a file is not what it should be (a PNG chunk whose CRC
is wrong, image data of the wrong length, an SVG that is not XML).
"""
import json
import math
import re
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

SVG = "{http://www.w3.org/2000/svg}"
# dtrain's stated limit: a longer line of metrics.jsonl is not a record.
MAX_LINE_BYTES = 64 * 1024


class Invalid(Exception):
    pass


def svg_series(path):
    """Each plot of the chart: gnuplot writes it as <g id="gnuplot_plot_N"> holding its key title,
    then a path whose first subpath is the key's sample line and whose others are the data."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise Invalid(f"{path}: not XML: {e}")
    series = []
    for group in root.iter(SVG + "g"):
        if not group.get("id", "").startswith("gnuplot_plot_"):
            continue
        title = group.find(SVG + "title")
        legend = [t.text for t in group.iter(SVG + "text")]
        subpaths = []
        for element in group.iter(SVG + "path"):
            for sub in re.split(r"(?=M)", element.get("d", "")):
                points = [[float(x), float(y)]
                          for x, y in re.findall(r"[ML]\s*(-?[\d.]+),(-?[\d.]+)", sub)]
                if points:
                    subpaths.append(points)
        data = [p for sub in subpaths[1:] for p in sub]
        marks = len(list(group.iter(SVG + "use")))
        series.append({"title": title.text if title is not None else None,
                       "legend": legend, "points": data, "marks": marks})
    return {"width": float(root.get("width", "0")), "height": float(root.get("height", "0")),
            "series": series}


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def png_pixels(path, colours):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise Invalid(f"{path}: no PNG signature")
    at, chunks = 8, []
    while at < len(data):
        if at + 8 > len(data):
            raise Invalid(f"{path}: a chunk header cut at byte {at}")
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if len(body) != length or at + 12 + length > len(data):
            raise Invalid(f"{path}: chunk {kind!r} cut short")
        (crc,) = struct.unpack(">I", data[at + 8 + length:at + 12 + length])
        if zlib.crc32(kind + body) != crc:
            raise Invalid(f"{path}: chunk {kind!r} has a wrong CRC")
        chunks.append((kind, body))
        at += 12 + length
        if kind == b"IEND":
            break
    if not chunks or chunks[0][0] != b"IHDR" or chunks[-1][0] != b"IEND":
        raise Invalid(f"{path}: not IHDR first and IEND last")
    width, height, depth, colour_type, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}.get(colour_type)
    if channels is None or depth != 8 or interlace != 0:
        raise Invalid(f"{path}: colour type {colour_type}, depth {depth}, interlace {interlace}")
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    stride = width * channels
    if len(raw) != height * (1 + stride):
        raise Invalid(f"{path}: {len(raw)} bytes of image data for {width}x{height}")
    palette = next((body for kind, body in chunks if kind == b"PLTE"), b"")
    wanted = {tuple(int(v) for v in c.split(",")): 0 for c in colours}
    columns = {colour: set() for colour in wanted}
    previous = bytearray(stride)
    for row in range(height):
        start = row * (1 + stride)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = previous[i]
            c = previous[i - channels] if i >= channels else 0
            line[i] = (line[i] + (0, a, b, (a + b) // 2, paeth(a, b, c))[kind]) & 0xFF
        if wanted:
            for x in range(width):
                pixel = line[x * channels:x * channels + channels]
                if colour_type == 3:
                    rgb = tuple(palette[3 * pixel[0]:3 * pixel[0] + 3])
                else:
                    rgb = tuple(pixel[:3]) if channels >= 3 else (pixel[0],) * 3
                if rgb in wanted:
                    wanted[rgb] += 1
                    columns[rgb].add(x)
        previous = line
    return {"width": width, "height": height,
            "pixels": {",".join(map(str, k)): v for k, v in wanted.items()},
            "columns": {",".join(map(str, k)): len(v) for k, v in columns.items()}}


def refuse_constant(name):
    raise ValueError(name)  # NaN, Infinity: not JSON


def jsonl_points(path, scalar):
    """One point per step, the first at that step; a start line at step S drops what was logged
    after S; lines that are not records and values that are not finite numbers are skipped."""
    points = []
    with open(path, "rb") as f:
        for raw in f:
            raw = raw.rstrip(b"\n")
            if len(raw) > MAX_LINE_BYTES:
                continue
            try:
                record = json.loads(raw.decode("utf-8"), parse_constant=refuse_constant)
            except (ValueError, UnicodeDecodeError, RecursionError):
                continue
            if not isinstance(record, dict):
                continue
            step = record.get("step")
            if isinstance(step, bool) or not isinstance(step, int) or step < 0:
                continue
            if record.get("start") is True:
                points = [p for p in points if p[0] <= step]
            value = record.get(scalar)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if not math.isfinite(value):
                continue
            if points and step <= points[-1][0]:
                continue
            points.append([step, value])
    return {"points": points}


def main(argv):
    try:
        if len(argv) >= 2 and argv[0] == "svg":
            out = svg_series(argv[1])
        elif len(argv) >= 2 and argv[0] == "png":
            out = png_pixels(argv[1], argv[2:])
        elif len(argv) == 3 and argv[0] == "jsonl":
            out = jsonl_points(argv[1], argv[2])
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except (Invalid, OSError, zlib.error) as e:
        print(f"chart_reader: {e}", file=sys.stderr)
        return 1
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
