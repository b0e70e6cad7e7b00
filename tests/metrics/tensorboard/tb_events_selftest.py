#!/usr/bin/env python3
"""Self-test of tb_events.py, the independent TensorBoard event file reader: it writes event files
with its own TFRecord framing (its own masked CRC-32C, checked against a checksum taken from a real
TensorFlow event file) and the messages compiled from the .proto files beside it, damages some of
them, and runs tb_events.py as a program on them, comparing its whole JSON with what was written.

  /usr/bin/python3 tests/metrics/tensorboard/tb_events_selftest.py [-v]

ctest runs it as TbEventsReader.SelfTest. Needs protoc, python3-protobuf and python3-crcmod; without
them it exits 77, which ctest reports as skipped.
"""

import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # No __pycache__ in the source tree.
HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "tb_events.py")
sys.path.insert(0, HERE)
import tb_events  # noqa: E402  (only for load_protos: the messages to write with)

# Without protoc, protobuf or crcmod the test cannot run: exit status 77, which ctest reports as
# skipped (SKIP_RETURN_CODE in tests/CMakeLists.txt), with the reason.
try:
    import crcmod.predefined
except ImportError as e:
    print(f"SKIPPED: {e} (Debian: python3-crcmod)")
    sys.exit(77)
try:
    P = tb_events.load_protos()
except tb_events.UsageError as e:
    print(f"SKIPPED: {e}")
    sys.exit(77)
Event = P.event_pb2.Event
SessionLog = P.event_pb2.SessionLog
Summary = P.summary_pb2.Summary
SummaryMetadata = P.summary_pb2.SummaryMetadata
HistogramProto = P.summary_pb2.HistogramProto
TensorProto = P.tensor_pb2.TensorProto
TensorShapeProto = P.tensor_shape_pb2.TensorShapeProto
T = P.types_pb2

_crc = crcmod.predefined.Crc("crc-32c")


def writer_masked_crc(data):
    """The writer's own masked CRC-32C, not tb_events.masked_crc."""
    c = _crc.new(data).crcValue
    rotated = ((c >> 15) | (c << 17)) & 0xFFFFFFFF
    return (rotated + 0xA282EAD8) % (1 << 32)


def frame(payload):
    header = struct.pack("<Q", len(payload))
    return (header + struct.pack("<I", writer_masked_crc(header)) + payload +
            struct.pack("<I", writer_masked_crc(payload)))


def write_records(path, payloads):
    """Writes the framed payloads; returns each record's offset and the file's bytes."""
    offsets, data = [], b""
    for p in payloads:
        offsets.append(len(data))
        data += frame(p)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return offsets, data


def metadata(plugin):
    return SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name=plugin))


def shape(*dims):
    return TensorShapeProto(dim=[TensorShapeProto.Dim(size=d) for d in dims])


def summary_event(wall_time, step, values):
    return Event(wall_time=wall_time, step=step, summary=Summary(value=values))


# The good file: every kind of record the reader knows, and the JSON it must print for each.
BIG_STEP = 2**40 + 3
GOOD = [
    (Event(wall_time=1700000000.25, step=0, file_version="brain.Event:2"),
     {"wall_time": 1700000000.25, "step": 0, "file_version": "brain.Event:2"}),
    (Event(wall_time=1700000000.5, step=0, session_log=SessionLog(status=SessionLog.START)),
     {"wall_time": 1700000000.5, "step": 0, "session_log": "START"}),
    (summary_event(1700000001.0, 1, [
        Summary.Value(tag="loss", simple_value=0.75),
        Summary.Value(tag="accuracy", metadata=metadata("scalars"),
                      tensor=TensorProto(dtype=T.DT_FLOAT, tensor_shape=shape(),
                                         float_val=[0.5]))]),
     {"wall_time": 1700000001.0, "step": 1, "summary": [
         {"tag": "loss", "plugin": None, "has_metadata": False, "kind": "scalar", "value": 0.75},
         {"tag": "accuracy", "plugin": "scalars", "has_metadata": True, "kind": "scalar",
          "value": 0.5}]}),
    # The plugin of "accuracy" comes from its first value, as TensorBoard remembers it.
    (summary_event(1700000002.0, 2, [
        Summary.Value(tag="accuracy",
                      tensor=TensorProto(dtype=T.DT_DOUBLE, tensor_shape=shape(),
                                         tensor_content=struct.pack("<d", 0.625))),
        Summary.Value(tag="lr", metadata=metadata("scalars"),
                      tensor=TensorProto(dtype=T.DT_DOUBLE, tensor_shape=shape(),
                                         double_val=[0.001]))]),
     {"wall_time": 1700000002.0, "step": 2, "summary": [
         {"tag": "accuracy", "plugin": "scalars", "has_metadata": False, "kind": "scalar",
          "value": 0.625},
         {"tag": "lr", "plugin": "scalars", "has_metadata": True, "kind": "scalar",
          "value": 0.001}]}),
    (summary_event(1700000003.0, 3, [
        Summary.Value(tag="weights", histo=HistogramProto(
            min=-1.5, max=2.0, num=4, sum=1.5, sum_squares=7.5,
            bucket_limit=[-1.0, 0.0, 2.0], bucket=[1, 0, 3])),
        Summary.Value(tag="grads", metadata=metadata("histograms"),
                      tensor=TensorProto(dtype=T.DT_DOUBLE, tensor_shape=shape(2, 3),
                                         double_val=[-1, 0, 2, 0, 1.5, 5])),
        Summary.Value(tag="grads32", metadata=metadata("histograms"),
                      tensor=TensorProto(dtype=T.DT_FLOAT, tensor_shape=shape(1, 3),
                                         tensor_content=struct.pack("<3f", 0.25, 0.5, 8)))]),
     {"wall_time": 1700000003.0, "step": 3, "summary": [
         {"tag": "weights", "plugin": None, "has_metadata": False, "kind": "histogram",
          "histo": {"min": -1.5, "max": 2.0, "num": 4.0, "sum": 1.5, "sum_squares": 7.5,
                    "bucket_limit": [-1.0, 0.0, 2.0], "bucket": [1.0, 0.0, 3.0]}},
         {"tag": "grads", "plugin": "histograms", "has_metadata": True, "kind": "histogram",
          "rows": [[-1.0, 0.0, 2.0], [0.0, 1.5, 5.0]]},
         {"tag": "grads32", "plugin": "histograms", "has_metadata": True, "kind": "histogram",
          "rows": [[0.25, 0.5, 8.0]]}]}),
    (summary_event(1700000004.0, 4, [
        Summary.Value(tag="note", metadata=metadata("text"),
                      tensor=TensorProto(dtype=T.DT_STRING, tensor_shape=shape(),
                                         string_val=["dtrain ✓ run 7".encode()])),
        Summary.Value(tag="lines", metadata=metadata("text"),
                      tensor=TensorProto(dtype=T.DT_STRING, tensor_shape=shape(2),
                                         string_val=[b"first", b"second"])),
        Summary.Value(tag="counts",
                      tensor=TensorProto(dtype=T.DT_INT64, tensor_shape=shape(2),
                                         int64_val=[1, 2]))]),
     {"wall_time": 1700000004.0, "step": 4, "summary": [
         {"tag": "note", "plugin": "text", "has_metadata": True, "kind": "text",
          "text": "dtrain ✓ run 7"},
         {"tag": "lines", "plugin": "text", "has_metadata": True, "kind": "text",
          "text": "first\nsecond"},
         {"tag": "counts", "plugin": None, "has_metadata": False, "kind": "tensor",
          "dtype": "DT_INT64", "shape": [2]}]}),
    (summary_event(1700000005.0, BIG_STEP, [Summary.Value(tag="loss", simple_value=-2.5)]),
     {"wall_time": 1700000005.0, "step": BIG_STEP, "summary": [
         {"tag": "loss", "plugin": None, "has_metadata": False, "kind": "scalar",
          "value": -2.5}]}),
    (Event(wall_time=1700000006.0, step=BIG_STEP, session_log=SessionLog(status=SessionLog.STOP)),
     {"wall_time": 1700000006.0, "step": BIG_STEP, "session_log": "STOP"}),
]
GOOD_PAYLOADS = [e.SerializeToString() for e, _ in GOOD]
GOOD_JSON = [j for _, j in GOOD]


def strict_json(text):
    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def run_tool(*args):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True)


class TbEventsSelfTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="tb_events_selftest_")
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, "run", name)

    def dump(self, *paths):
        result = run_tool("dump", *paths)
        self.assertEqual(result.returncode, 0, result.stderr)
        return strict_json(result.stdout)

    def only_file(self, path):
        report = self.dump(path)
        self.assertEqual([f["path"] for f in report["files"]], [path])
        return report["files"][0]

    def write_good(self, name="events.out.tfevents.1700000000.host.1234.0"):
        path = self.path(name)
        offsets, data = write_records(path, GOOD_PAYLOADS)
        return path, offsets, data

    def test_writer_crc_matches_a_real_tensorflow_event_file(self):
        # The masked CRC of a file_version record's data in a file TensorFlow wrote (quoted by
        # TensorBoard's Rust reader, tensorboard/data/server/masked_crc.rs).
        data = b"\x1a\x11CRC test, one two"
        self.assertEqual(writer_masked_crc(data), 0x5794D08A)
        self.assertEqual(tb_events.masked_crc(data), 0x5794D08A)
        self.assertEqual(Event(file_version="CRC test, one two").SerializeToString(), data)
        # RFC 3720 B.4: CRC-32C of 32 zero bytes is 0x8a9136aa.
        self.assertEqual(_crc.new(bytes(32)).crcValue, 0x8A9136AA)

    def test_good_file_decodes_exactly(self):
        path, _, data = self.write_good()
        f = self.only_file(path)
        self.assertEqual(f, {"path": path, "records": len(GOOD), "bad_records": [],
                             "truncated_tail": None, "file_version": "brain.Event:2",
                             "first_record_is_file_version": True, "events": GOOD_JSON})

    def test_folders_are_searched_recursively_for_event_files_only(self):
        path, _, _ = self.write_good()
        other = os.path.join(self.dir, "run", "eval", "events.out.tfevents.1700000009.host.1.0")
        write_records(other, [GOOD_PAYLOADS[0], GOOD_PAYLOADS[-1]])
        with open(os.path.join(self.dir, "run", "notes.txt"), "w") as f:
            f.write("not an event file")
        report = self.dump(self.dir)
        self.assertEqual([f["path"] for f in report["files"]], sorted([path, other]))
        by_path = {f["path"]: f for f in report["files"]}
        self.assertEqual(by_path[other]["events"], [GOOD_JSON[0], GOOD_JSON[-1]])
        self.assertEqual(by_path[path]["events"], GOOD_JSON)

    def test_check_passes_a_good_file_and_finds_expected_tags(self):
        path, _, _ = self.write_good()
        result = run_tool("check", path, "--expect-scalar", "loss", "--expect-scalar",
                          "accuracy", "--expect-scalar", "lr", "--expect-histogram", "weights",
                          "--expect-histogram", "grads", "--expect-text", "note")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(strict_json(result.stdout)["files"][0]["events"], GOOD_JSON)

    def test_check_fails_when_an_expected_tag_is_absent_or_of_another_kind(self):
        path, _, _ = self.write_good()
        for args, tag in [(["--expect-scalar", "missing"], "missing"),
                          (["--expect-histogram", "loss"], "loss"),
                          (["--expect-text", "grads"], "grads"),
                          (["--expect-scalar", "counts"], "counts")]:
            result = run_tool("check", path, "--expect-scalar", "loss", *args)
            self.assertEqual(result.returncode, 1, args)
            self.assertEqual(result.stdout, "")
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
            self.assertIn(repr(tag), result.stderr)

    def test_scalars(self):
        path, _, _ = self.write_good()
        for tag, expected in [("loss", [[1, 0.75], [BIG_STEP, -2.5]]),
                              ("accuracy", [[1, 0.5], [2, 0.625]]), ("lr", [[2, 0.001]]),
                              ("grads", []), ("absent", [])]:
            result = run_tool("scalars", path, tag)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(strict_json(result.stdout), expected, tag)

    def test_a_flipped_data_byte_is_reported_and_the_other_records_read(self):
        path, offsets, data = self.write_good()
        bad = 4  # The histograms: no later record depends on them.
        damaged = bytearray(data)
        damaged[offsets[bad] + 12 + 5] ^= 0x01
        with open(path, "wb") as f:
            f.write(damaged)
        f = self.only_file(path)
        self.assertEqual(f["bad_records"], [{"offset": offsets[bad], "why": "data crc mismatch"}])
        self.assertEqual(f["records"], len(GOOD))
        self.assertIsNone(f["truncated_tail"])
        self.assertTrue(f["first_record_is_file_version"])
        self.assertEqual(f["events"], GOOD_JSON[:bad] + GOOD_JSON[bad + 1:])
        result = run_tool("check", path)
        self.assertEqual(result.returncode, 1)
        self.assertIn("data crc mismatch", result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1)

    def test_a_flipped_data_crc_byte_is_a_data_crc_mismatch(self):
        path, offsets, data = self.write_good()
        damaged = bytearray(data)
        damaged[offsets[2] - 1] ^= 0x80  # The last byte of record 1's data CRC.
        with open(path, "wb") as f:
            f.write(damaged)
        f = self.only_file(path)
        self.assertEqual(f["bad_records"], [{"offset": offsets[1], "why": "data crc mismatch"}])
        self.assertEqual(f["events"], GOOD_JSON[:1] + GOOD_JSON[2:])

    def test_a_flipped_length_byte_stops_the_file(self):
        path, offsets, data = self.write_good()
        for flip in [0, 3, 7]:  # A small change, and lengths far past the end of the file.
            damaged = bytearray(data)
            damaged[offsets[3] + flip] ^= 0x10
            with open(path, "wb") as f:
                f.write(damaged)
            f = self.only_file(path)
            self.assertEqual(f["bad_records"],
                             [{"offset": offsets[3], "why": "length crc mismatch"}], flip)
            self.assertEqual(f["records"], 3)
            self.assertIsNone(f["truncated_tail"])
            self.assertEqual(f["events"], GOOD_JSON[:3])
            result = run_tool("check", path)
            self.assertEqual(result.returncode, 1)
            self.assertIn("length crc mismatch", result.stderr)

    def test_an_unparseable_event_is_reported_and_reading_goes_on(self):
        path = self.path("events.out.tfevents.1.host")
        junk = b"\xff\xff\xff\xff"  # A field tag whose varint never ends.
        offsets, _ = write_records(path, [GOOD_PAYLOADS[0], junk, GOOD_PAYLOADS[2]])
        f = self.only_file(path)
        self.assertEqual(f["bad_records"], [{"offset": offsets[1], "why": "unparseable Event"}])
        self.assertEqual(f["records"], 3)
        self.assertEqual(f["events"], [GOOD_JSON[0], GOOD_JSON[2]])
        self.assertEqual(run_tool("check", path).returncode, 1)

    def test_a_file_cut_inside_its_last_record_keeps_the_earlier_ones(self):
        path, offsets, data = self.write_good()
        last = offsets[-1]
        for cut in [last + 3, last + 12, last + 12 + 2, len(data) - 1]:
            with open(path, "wb") as f:
                f.write(data[:cut])
            f = self.only_file(path)
            self.assertEqual(f["truncated_tail"], {"offset": last, "bytes": cut - last}, cut)
            self.assertEqual(f["bad_records"], [])
            self.assertEqual(f["records"], len(GOOD) - 1)
            self.assertEqual(f["events"], GOOD_JSON[:-1])
            result = run_tool("check", path, "--expect-scalar", "loss")
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(strict_json(result.stdout)["files"][0]["truncated_tail"],
                             {"offset": last, "bytes": cut - last})

    def test_check_needs_file_version_first(self):
        path = self.path("events.out.tfevents.2.host")
        write_records(path, GOOD_PAYLOADS[1:3])
        f = self.only_file(path)
        self.assertEqual((f["file_version"], f["first_record_is_file_version"]), (None, False))
        self.assertEqual(f["events"], GOOD_JSON[1:3])
        result = run_tool("check", path)
        self.assertEqual(result.returncode, 1)
        self.assertIn("file_version", result.stderr)
        # A file_version that is not the first record is reported but still fails check.
        write_records(path, [GOOD_PAYLOADS[1], GOOD_PAYLOADS[0]])
        f = self.only_file(path)
        self.assertEqual((f["file_version"], f["first_record_is_file_version"]),
                         ("brain.Event:2", False))
        self.assertEqual(run_tool("check", path).returncode, 1)
        # So does a first record whose version is not TensorFlow's.
        write_records(path, [Event(file_version="other:1").SerializeToString()])
        self.assertEqual(run_tool("check", path).returncode, 1)

    def test_non_finite_values_are_strict_json(self):
        path = self.path("events.out.tfevents.3.host")
        write_records(path, [GOOD_PAYLOADS[0], summary_event(5.0, 9, [
            Summary.Value(tag="loss", simple_value=float("nan")),
            Summary.Value(tag="loss", simple_value=float("-inf"))]).SerializeToString()])
        result = run_tool("scalars", path, "loss")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(strict_json(result.stdout), [[9, "NaN"], [9, "-Infinity"]])

    def test_malformed_plugin_tensors_are_reported_as_tensors(self):
        path = self.path("events.out.tfevents.4.host")
        write_records(path, [GOOD_PAYLOADS[0], summary_event(5.0, 1, [
            Summary.Value(tag="s", metadata=metadata("scalars"),
                          tensor=TensorProto(dtype=T.DT_FLOAT, tensor_shape=shape(2),
                                             float_val=[1, 2])),
            Summary.Value(tag="h", metadata=metadata("histograms"),
                          tensor=TensorProto(dtype=T.DT_DOUBLE, tensor_shape=shape(2, 3),
                                             double_val=[1, 2, 3, 4]))]).SerializeToString()])
        values = self.only_file(path)["events"][1]["summary"]
        self.assertEqual([(v["tag"], v["kind"], v["shape"]) for v in values],
                         [("s", "tensor", [2]), ("h", "tensor", [2, 3])])
        self.assertTrue(all("why" in v for v in values))
        result = run_tool("check", path, "--expect-scalar", "s")
        self.assertEqual(result.returncode, 1)

    def test_usage_errors_and_missing_paths_exit_2(self):
        path, _, _ = self.write_good()
        missing = os.path.join(self.dir, "no-such-run")
        for args in [["dump", path, missing], ["check", missing], ["scalars", missing, "loss"]]:
            result = run_tool(*args)
            self.assertEqual(result.returncode, 2, args)
            self.assertIn(missing, result.stderr)
            self.assertEqual(result.stdout, "")
        for args in [[], ["dump"], ["frobnicate", path], ["scalars", path],
                     ["check", path, "--expect-scalar"]]:
            self.assertEqual(run_tool(*args).returncode, 2, args)

    def test_check_fails_on_a_folder_without_event_files(self):
        os.makedirs(os.path.join(self.dir, "empty"))
        result = run_tool("check", os.path.join(self.dir, "empty"))
        self.assertEqual(result.returncode, 1)
        self.assertIn("no event files", result.stderr)


if __name__ == "__main__":
    unittest.main()
