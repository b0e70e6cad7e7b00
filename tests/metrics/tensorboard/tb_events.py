#!/usr/bin/env python3
"""A reader of TensorBoard event files that shares no code with dtrain, to check what dtrain
writes: Python's protobuf runtime with the messages of the .proto files beside this script (typed
in from TensorFlow's event.proto, summary.proto, tensor.proto, tensor_shape.proto and types.proto,
compiled with protoc into a temporary folder at start), and crcmod's CRC-32C.

  tb_events.py dump PATH...
  tb_events.py check PATH... [--expect-scalar TAG]... [--expect-histogram TAG]...
                             [--expect-text TAG]...
  tb_events.py scalars PATH... TAG

A PATH is an event file, or a folder searched recursively for events.out.tfevents.* files (in
sorted path order).

dump checks the TFRecord framing of every record (uint64 length, little-endian; uint32 masked
CRC-32C of the 8 length bytes; the data; uint32 masked CRC-32C of the data), parses each record as
a tensorflow.Event and prints one JSON object:

  {"files": [{"path", "records", "bad_records": [{"offset", "why"}], "truncated_tail",
              "file_version", "first_record_is_file_version", "events": [...]}]}

  records        records whose frame was complete (good or bad); events holds the good ones.
  bad_records    why: "length crc mismatch" (reading that file stops there: the length cannot be
                 trusted), "data crc mismatch" or "unparseable Event" (reading goes on after it).
  truncated_tail {"offset", "bytes"} when the file ends inside a record (what a killed writer
                 leaves), else null; every earlier record is kept.
  file_version   the first file_version event's string (e.g. "brain.Event:2"), or null.

Each event is {"wall_time", "step"} and one of "file_version": str, "session_log": "START" |
"STOP" | "CHECKPOINT" | "STATUS_UNSPECIFIED" (with "checkpoint_path" and "msg" when set),
"summary": [value...], or "other": the name of another Event field that is set (graph_def,
log_message, tagged_run_metadata, meta_graph_def). Each summary value is {"tag", "plugin",
"has_metadata", "kind"} and:

  kind "scalar"    "value": from simple_value, or from a rank-0 DT_FLOAT/DT_DOUBLE tensor of plugin
                   "scalars" (float_val, double_val or tensor_content).
  kind "histogram" "histo": {"min", "max", "num", "sum", "sum_squares", "bucket_limit",
                   "bucket"} from a HistogramProto, or "rows": [[left, right, count], ...] from a
                   [k, 3] DT_DOUBLE/DT_FLOAT tensor of plugin "histograms".
  kind "text"      "text": a DT_STRING tensor of plugin "text" decoded as UTF-8: rank 0 as is,
                   rank 1 joined with "\\n", rank 2 rows joined with "\\n" and cells with "\\t".
  kind "tensor"    any other tensor: "dtype", "shape", and "why" when a plugin named above did
                   not get the tensor it expects.
  kind "image", "audio", "obsolete_old_style_histogram" or "none" otherwise.

"plugin" is the value's own SummaryMetadata plugin_name or, as TensorBoard does, the one an
earlier value of the same tag in that file carried; null if neither. Floats that are not finite
are written as the strings "NaN", "Infinity" and "-Infinity" (strict JSON).

check prints the same JSON and exits 0, or exits 1 with a one-line reason on stderr if no event
file was found, a file has a bad record, its first record is not a file_version event starting
"brain.Event:", or an expected tag has no value of that kind in any file. A truncated tail alone
is not an error (it is in the JSON).

scalars prints a JSON list of [step, value] for the tag's scalar values, in file order.

Exit status 2: a usage error, a missing path, protoc or the Python modules missing or failing.
Needs protoc and the Python modules google.protobuf and crcmod (Debian: protobuf-compiler,
python3-protobuf, python3-crcmod).
"""

import argparse
import importlib
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_FILES = ["types.proto", "tensor_shape.proto", "tensor.proto", "summary.proto", "event.proto"]
FILE_PREFIX = "events.out.tfevents."


class UsageError(Exception):
    """Ends the program with exit status 2 and this message."""


try:
    import crcmod.predefined
    _crc32c = crcmod.predefined.mkCrcFun("crc-32c")
except ImportError as e:  # Reported when main() runs, with exit status 2.
    _crc32c = None
    _IMPORT_ERROR = str(e)


def masked_crc(data):
    """CRC-32C of data, masked as TFRecord files store it: rotated right by 15 bits, plus
    0xa282ead8, modulo 2^32."""
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


_PROTOS = None


def load_protos():
    """Compiles the .proto files beside this script with protoc into a temporary folder and
    imports them; returns a namespace with event_pb2, summary_pb2, tensor_pb2,
    tensor_shape_pb2 and types_pb2. Raises UsageError if that fails."""
    global _PROTOS
    if _PROTOS is not None:
        return _PROTOS
    if _crc32c is None:
        raise UsageError(f"needs the Python module crcmod (Debian: python3-crcmod): "
                         f"{_IMPORT_ERROR}")
    try:
        import google.protobuf  # noqa: F401
    except ImportError as e:
        raise UsageError(f"needs the Python module google.protobuf (Debian: python3-protobuf): "
                         f"{e}")
    protoc = os.environ.get("PROTOC") or shutil.which("protoc") or "/usr/bin/protoc"
    with tempfile.TemporaryDirectory(prefix="tb_events_") as out:
        try:
            result = subprocess.run([protoc, "-I", HERE, "--python_out", out] +
                                    [os.path.join(HERE, p) for p in PROTO_FILES],
                                    capture_output=True, text=True)
        except OSError as e:
            raise UsageError(f"cannot run protoc ({protoc}; Debian: protobuf-compiler): {e}")
        if result.returncode != 0:
            raise UsageError(f"protoc failed (exit {result.returncode}): "
                             f"{result.stderr.strip()}")
        sys.path.insert(0, out)
        sys.dont_write_bytecode, saved = True, sys.dont_write_bytecode
        try:
            modules = {name: importlib.import_module(name) for name in
                       ["types_pb2", "tensor_shape_pb2", "tensor_pb2", "summary_pb2",
                        "event_pb2"]}
        except Exception as e:  # A protoc and protobuf runtime that do not match, say.
            raise UsageError(f"cannot import the code protoc generated: {e}")
        finally:
            sys.path.remove(out)
            sys.dont_write_bytecode = saved
    _PROTOS = argparse.Namespace(**modules)
    return _PROTOS


# ---------------------------------------------------------------------------------------------
# Framing.


def read_records(data):
    """Splits a TFRecord file's bytes. Returns (records, bad, truncated, complete): records is a
    list of (offset, payload) whose both CRCs matched; bad a list of {"offset", "why"} for
    framing problems; truncated {"offset", "bytes"} or None; complete counts the complete
    frames, good or bad."""
    records, bad, truncated = [], [], None
    complete = 0
    offset, size = 0, len(data)
    while offset < size:
        if size - offset < 12:
            truncated = {"offset": offset, "bytes": size - offset}
            break
        length_bytes = data[offset:offset + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        (length_crc,) = struct.unpack("<I", data[offset + 8:offset + 12])
        if masked_crc(length_bytes) != length_crc:
            bad.append({"offset": offset, "why": "length crc mismatch"})
            break
        end = offset + 12 + length + 4
        if end > size:
            truncated = {"offset": offset, "bytes": size - offset}
            break
        complete += 1
        payload = data[offset + 12:offset + 12 + length]
        (data_crc,) = struct.unpack("<I", data[offset + 12 + length:end])
        if masked_crc(payload) != data_crc:
            bad.append({"offset": offset, "why": "data crc mismatch"})
        else:
            records.append((offset, payload))
        offset = end
    return records, bad, truncated, complete


# ---------------------------------------------------------------------------------------------
# Decoding.


def _json_float(x):
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def _shape(tensor):
    if tensor.tensor_shape.unknown_rank:
        return None
    return [d.size for d in tensor.tensor_shape.dim]


def _numbers(tensor, protos, count):
    """The tensor's values as floats (DT_FLOAT or DT_DOUBLE), or a string saying why not."""
    T = protos.types_pb2
    if tensor.dtype == T.DT_FLOAT:
        listed, fmt = list(tensor.float_val), "<f"
    elif tensor.dtype == T.DT_DOUBLE:
        listed, fmt = list(tensor.double_val), "<d"
    else:
        return f"dtype {T.DataType.Name(tensor.dtype)}, not DT_FLOAT or DT_DOUBLE"
    if tensor.tensor_content:
        width = struct.calcsize(fmt)
        if len(tensor.tensor_content) != count * width:
            return (f"tensor_content has {len(tensor.tensor_content)} bytes, not "
                    f"{count} x {width}")
        if listed:
            return "both tensor_content and a repeated value field"
        return [v for (v,) in struct.iter_unpack(fmt, tensor.tensor_content)]
    if len(listed) == count:
        return listed
    if len(listed) == 1 and count > 0:  # Version 0: one value fills the shape.
        return listed * count
    return f"{len(listed)} values for {count} elements"


def _text(tensor, protos):
    T = protos.types_pb2
    if tensor.dtype != T.DT_STRING:
        return None, f"dtype {T.DataType.Name(tensor.dtype)}, not DT_STRING"
    shape = _shape(tensor)
    if shape is None or len(shape) > 2 or any(d < 0 for d in shape):
        return None, f"shape {shape}, not of rank 0, 1 or 2"
    count = math.prod(shape)
    strings = list(tensor.string_val)
    if len(strings) == 1 and count > 1:
        strings = strings * count
    if len(strings) != count:
        return None, f"{len(strings)} strings for {count} elements"
    try:
        decoded = [s.decode("utf-8") for s in strings]
    except UnicodeDecodeError as e:
        return None, f"not UTF-8: {e}"
    if len(shape) == 0:
        return decoded[0], None
    if len(shape) == 1:
        return "\n".join(decoded), None
    columns = shape[1]
    rows = [decoded[i:i + columns] for i in range(0, count, columns)] if columns else []
    return "\n".join("\t".join(row) for row in rows), None


def decode_value(value, plugins, protos):
    """One Summary.Value as a dict; plugins maps tag to the plugin an earlier value named."""
    T = protos.types_pb2
    has_metadata = value.HasField("metadata")
    own_plugin = value.metadata.plugin_data.plugin_name if has_metadata else ""
    if own_plugin:
        plugins[value.tag] = own_plugin
    plugin = own_plugin or plugins.get(value.tag)
    out = {"tag": value.tag, "plugin": plugin or None, "has_metadata": has_metadata}
    which = value.WhichOneof("value")
    if which == "simple_value":
        out.update(kind="scalar", value=_json_float(value.simple_value))
    elif which == "histo":
        h = value.histo
        out.update(kind="histogram", histo={
            "min": _json_float(h.min), "max": _json_float(h.max), "num": _json_float(h.num),
            "sum": _json_float(h.sum), "sum_squares": _json_float(h.sum_squares),
            "bucket_limit": [_json_float(x) for x in h.bucket_limit],
            "bucket": [_json_float(x) for x in h.bucket]})
    elif which == "tensor":
        tensor = value.tensor
        shape = _shape(tensor)
        why = None
        if plugin == "scalars":
            if shape != []:
                why = f"plugin scalars wants a rank-0 tensor, not shape {shape}"
            else:
                numbers = _numbers(tensor, protos, 1)
                if isinstance(numbers, str):
                    why = f"plugin scalars: {numbers}"
                else:
                    out.update(kind="scalar", value=_json_float(numbers[0]))
                    return out
        elif plugin == "histograms":
            if shape is None or len(shape) != 2 or shape[1] != 3 or shape[0] < 0:
                why = f"plugin histograms wants a [k, 3] tensor, not shape {shape}"
            else:
                numbers = _numbers(tensor, protos, shape[0] * 3)
                if isinstance(numbers, str):
                    why = f"plugin histograms: {numbers}"
                else:
                    rows = [[_json_float(x) for x in numbers[i:i + 3]]
                            for i in range(0, len(numbers), 3)]
                    out.update(kind="histogram", rows=rows)
                    return out
        elif plugin == "text":
            text, problem = _text(tensor, protos)
            if problem is None:
                out.update(kind="text", text=text)
                return out
            why = f"plugin text: {problem}"
        out.update(kind="tensor", dtype=T.DataType.Name(tensor.dtype)
                   if tensor.dtype in T.DataType.values() else tensor.dtype, shape=shape)
        if why:
            out["why"] = why
    else:
        out["kind"] = which or "none"
    return out


def decode_event(event, plugins, protos):
    out = {"wall_time": _json_float(event.wall_time), "step": event.step}
    which = event.WhichOneof("what")
    if which == "file_version":
        out["file_version"] = event.file_version
    elif which == "session_log":
        log = event.session_log
        SessionLog = protos.event_pb2.SessionLog
        out["session_log"] = (SessionLog.SessionStatus.Name(log.status)
                              if log.status in SessionLog.SessionStatus.values()
                              else log.status)
        if log.checkpoint_path:
            out["checkpoint_path"] = log.checkpoint_path
        if log.msg:
            out["msg"] = log.msg
    elif which == "summary":
        out["summary"] = [decode_value(v, plugins, protos) for v in event.summary.value]
    elif which is not None:
        out["other"] = which
    return out


def read_file(path, protos):
    with open(path, "rb") as f:
        data = f.read()
    records, bad, truncated, complete = read_records(data)
    events, plugins = [], {}
    file_version, first_is_version = None, False
    for offset, payload in records:
        event = protos.event_pb2.Event()
        try:
            event.ParseFromString(payload)
        except Exception:  # google.protobuf.message.DecodeError, or a RuntimeWarning's kin.
            bad.append({"offset": offset, "why": "unparseable Event"})
            continue
        if event.WhichOneof("what") == "file_version":
            if offset == 0:
                first_is_version = True
            if file_version is None:
                file_version = event.file_version
        events.append(decode_event(event, plugins, protos))
    bad.sort(key=lambda b: b["offset"])
    return {"path": path, "records": complete, "bad_records": bad, "truncated_tail": truncated,
            "file_version": file_version, "first_record_is_file_version": first_is_version,
            "events": events}


def find_files(paths):
    """The event files named by paths: files as given, folders searched recursively."""
    found = []
    for path in paths:
        if os.path.isdir(path):
            inside = []
            for root, _, names in os.walk(path):
                inside += [os.path.join(root, n) for n in names if n.startswith(FILE_PREFIX)]
            found += sorted(inside)
        elif os.path.exists(path):
            found.append(path)
        else:
            raise UsageError(f"no such file or folder: {path}")
    return found


def read_all(paths):
    protos = load_protos()
    return {"files": [read_file(p, protos) for p in find_files(paths)]}


def problems(report, expect):
    """The first reason check fails, or None. expect maps a kind to the tags it needs."""
    if not report["files"]:
        return "no event files (events.out.tfevents.*) found"
    for f in report["files"]:
        if f["bad_records"]:
            b = f["bad_records"][0]
            return (f"{f['path']}: {len(f['bad_records'])} bad record(s), the first at offset "
                    f"{b['offset']}: {b['why']}")
        if not f["first_record_is_file_version"]:
            return f"{f['path']}: the first record is not a file_version event"
        if not f["file_version"].startswith("brain.Event:"):
            return f"{f['path']}: file_version {f['file_version']!r} does not start brain.Event:"
    seen = {(v["kind"], v["tag"]) for f in report["files"] for e in f["events"]
            for v in e.get("summary", [])}
    for kind, tags in expect.items():
        for tag in tags:
            if (kind, tag) not in seen:
                return f"no {kind} value with tag {tag!r} in any event file"
    return None


def _dumps(obj):
    return json.dumps(obj, indent=1, allow_nan=False, ensure_ascii=False)


def main(argv):
    parser = argparse.ArgumentParser(
        description="Reads TensorBoard event files (independently of dtrain).",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    dump = sub.add_parser("dump", help="print every file's records as JSON")
    dump.add_argument("paths", nargs="+", metavar="PATH")
    check = sub.add_parser("check", help="like dump, but exit 1 on a problem")
    check.add_argument("paths", nargs="+", metavar="PATH")
    check.add_argument("--expect-scalar", action="append", default=[], metavar="TAG")
    check.add_argument("--expect-histogram", action="append", default=[], metavar="TAG")
    check.add_argument("--expect-text", action="append", default=[], metavar="TAG")
    scalars = sub.add_parser("scalars", help="print [step, value] of a scalar tag as JSON")
    scalars.add_argument("paths", nargs="+", metavar="PATH")
    scalars.add_argument("tag", metavar="TAG")
    args = parser.parse_args(argv)
    try:
        report = read_all(args.paths)
    except UsageError as e:
        print(f"tb_events.py: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"tb_events.py: cannot read {e.filename}: {e.strerror}", file=sys.stderr)
        return 2
    if args.command == "scalars":
        print(_dumps([[e["step"], v["value"]] for f in report["files"] for e in f["events"]
                      for v in e.get("summary", [])
                      if v["tag"] == args.tag and v["kind"] == "scalar"]))
        return 0
    if args.command == "check":
        reason = problems(report, {"scalar": args.expect_scalar,
                                   "histogram": args.expect_histogram,
                                   "text": args.expect_text})
        if reason:
            print(f"tb_events.py check: {reason}", file=sys.stderr)
            return 1
    print(_dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
