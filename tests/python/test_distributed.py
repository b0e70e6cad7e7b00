"""dtrain.distributed: three real processes under torchrun-style variables (one of them joining
with rank=, world_size=, rendezvous= instead) on loopback; their sums, means and broadcasts
checked bit for bit against numpy computed here, independently; bad arrays and a missing secret
refused with the message that names them."""
import os
import socket
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import numpy as np

import dtrain
import dtrain.distributed as dist

WORLD = 3
LENGTH = 100_003  # not divisible by the world: segments of unequal length
SECRET = "test-distributed-secret-0123456789abcdef"


def rank_values(rank):
    # Multiples of 1/8 below 2^10: every partial sum is exact in float32, so the ring's order of
    # additions cannot matter and numpy's sum is the bit-for-bit reference.
    rng = np.random.default_rng(rank)
    return (rng.integers(-8000, 8000, LENGTH) / 8).astype(np.float32)


def child(out_dir):
    """One rank: the collectives on its values, and the refusals, written to out_dir/rank<r>.npz."""
    explicit = os.environ.pop("DTRAIN_TEST_EXPLICIT", None)
    if explicit:
        port = os.environ.pop("MASTER_PORT")
        for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
            os.environ.pop(name, None)
        dist.init(rank=int(explicit), world_size=WORLD, rendezvous="127.0.0.1:" + port)
    else:
        dist.init()
    r = dist.rank()
    # A slice of a larger buffer: the result must land in that very memory.
    backing = np.full(LENGTH + 2, 7.0, np.float32)
    summed = backing[1:-1]
    summed[:] = rank_values(r)
    dist.allreduce(summed)
    mean = rank_values(r)
    dist.allreduce(mean, op="mean")
    broadcast = np.full((3, 5), r, np.int64)
    broadcast[0, 0] = (1 << 53) + r  # no float holds it: the bytes must travel as they are
    dist.broadcast(broadcast, root=1)
    errors = []
    for bad in (np.zeros(4, np.float64), np.zeros((4, 4), np.float32).T, [1.0, 2.0]):
        try:
            dist.allreduce(bad)
            errors.append("no error")
        except (TypeError, ValueError) as e:
            errors.append(type(e).__name__ + ": " + str(e))
    # A different root on every rank: each rank must hear of it at once, and the group go on.
    try:
        dist.broadcast(np.zeros(4, np.int32), root=r)
        roots = "no error"
    except dtrain.UsageError as e:
        roots = str(e)
    after = np.full(3, r, np.float32)
    dist.allreduce(after)
    dist.barrier()
    np.savez(os.path.join(out_dir, "rank%d.npz" % r), summed=summed, backing=backing, mean=mean,
             broadcast=broadcast, errors=np.array(errors), roots=np.array(roots), after=after,
             world=dist.world_size())
    dist.shutdown()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ThreeRanksTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        port = str(free_port())
        procs = []
        for r in range(WORLD):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(r),
                       LOCAL_WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                       DTRAIN_SECRET=SECRET)
            if r == 2:
                env["DTRAIN_TEST_EXPLICIT"] = "2"
            procs.append(subprocess.Popen([sys.executable, __file__, "--child", cls.dir.name],
                                          env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT))
        cls.outputs = []
        try:
            for p in procs:
                out, _ = p.communicate(timeout=120)
                cls.outputs.append((p.returncode, out.decode(errors="replace")))
        finally:
            for p in procs:  # a rank stuck in a collective is not left behind
                if p.poll() is None:
                    p.kill()
                    p.wait()
        cls.results = []
        for r in range(WORLD):
            path = os.path.join(cls.dir.name, "rank%d.npz" % r)
            cls.results.append(dict(np.load(path)) if os.path.exists(path) else None)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_every_rank_finished(self):
        for r, (code, out) in enumerate(self.outputs):
            self.assertEqual(code, 0, "rank %d:\n%s" % (r, out))
            self.assertIsNotNone(self.results[r])
            self.assertEqual(int(self.results[r]["world"]), WORLD)

    def test_sum_is_numpys_bit_for_bit_and_lands_in_the_array(self):
        expected = rank_values(0) + rank_values(1) + rank_values(2)
        for r, result in enumerate(self.results):
            np.testing.assert_array_equal(result["summed"].view(np.uint32),
                                          expected.view(np.uint32), "rank %d" % r)
            self.assertEqual(result["backing"][0], 7.0)
            self.assertEqual(result["backing"][-1], 7.0)
            np.testing.assert_array_equal(result["backing"][1:-1], expected)

    def test_mean_divides_the_sum_in_float32(self):
        expected = (rank_values(0) + rank_values(1) + rank_values(2)) * (np.float32(1) /
                                                                         np.float32(WORLD))
        for r, result in enumerate(self.results):
            np.testing.assert_array_equal(result["mean"].view(np.uint32),
                                          expected.view(np.uint32), "rank %d" % r)

    def test_broadcast_copies_the_roots_bytes(self):
        expected = np.full((3, 5), 1, np.int64)
        expected[0, 0] = (1 << 53) + 1
        for r, result in enumerate(self.results):
            np.testing.assert_array_equal(result["broadcast"], expected, "rank %d" % r)

    def test_a_broadcast_whose_ranks_name_different_roots_fails_on_every_rank(self):
        for r, result in enumerate(self.results):
            message = str(result["roots"])
            self.assertIn("the ranks name different roots (root 0 from rank 0, root 1 from rank 1, "
                          "root 2 from rank 2)", message, r)
            self.assertIn(f"this is rank {r}, which named {r}", message)
            np.testing.assert_array_equal(result["after"], np.full(3, 3, np.float32))

    def test_bad_arrays_are_refused_naming_what_is_wrong(self):
        dtype_error, layout_error, list_error = self.results[0]["errors"]
        self.assertIn("TypeError", dtype_error)
        self.assertIn("float64", dtype_error)
        self.assertIn("ValueError", layout_error)
        self.assertIn("not C-contiguous", layout_error)
        self.assertIn("TypeError", list_error)
        self.assertIn("got list", list_error)


class OneProcessTest(unittest.TestCase):
    def tearDown(self):
        dist.shutdown()

    def test_a_world_of_one_needs_no_secret_and_keeps_the_values(self):
        with mock.patch.dict(os.environ, {}, clear=False):
            os.environ.pop("DTRAIN_SECRET", None)
            dist.init(rank=0, world_size=1)
        a = np.arange(5, dtype=np.float32)
        dist.allreduce(a, op="mean")
        dist.broadcast(a, root=0)
        dist.barrier()
        np.testing.assert_array_equal(a, np.arange(5, dtype=np.float32))
        self.assertEqual((dist.rank(), dist.world_size()), (0, 1))
        with self.assertRaisesRegex(ValueError, r'op="max"'):
            dist.allreduce(a, op="max")
        with self.assertRaisesRegex(ValueError, "broadcast from rank 1"):
            dist.broadcast(a, root=1)

    def test_a_missing_secret_is_refused_as_dtrain_task_refuses_it(self):
        variables = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                     "MASTER_PORT": str(free_port())}
        with mock.patch.dict(os.environ, variables):
            os.environ.pop("DTRAIN_SECRET", None)
            with self.assertRaises(dtrain.UsageError) as raised:
                dist.init()
        message = str(raised.exception)
        self.assertIn("no cluster secret: the 2 ranks torchrun (RANK, WORLD_SIZE) starts", message)
        self.assertIn("DTRAIN_SECRET", message)
        self.assertFalse(dist.is_initialized())

    def test_collectives_before_init_say_so(self):
        with self.assertRaisesRegex(RuntimeError, "call init"):
            dist.barrier()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        unittest.main()
