"""The "dtrain" backend of torch.distributed: two real processes under torchrun-style variables;
all_reduce, broadcast, all_gather and barrier results; refusals of what it does not support; the
same small DistributedDataParallel job over dtrain and over Gloo, whose parameters must agree
within 1e-4; and what torch's unauthenticated TCPStore holds of dtrain's, read by an outsider with
torch's own client while the ranks run. Skipped (exit 77) where torch or this build's backend is
missing."""
import datetime
import os
import socket
import subprocess
import sys
import tempfile
import unittest

try:
    import torch
    import torch.distributed as dist
    import dtrain.torch  # noqa: F401  (registers the backend)
except ImportError as error:
    print("skipped: %s" % error)
    sys.exit(77)

WORLD = 2
STEPS = 5
PATIENCE = datetime.timedelta(seconds=120)  # a deadline against a hung rank, not a delay
# Where torch puts the default group's keys in the Store: PrefixStore("default_pg") around the
# TCPStore, then PrefixStore of the group's name ("0"), each joining with "/".
GROUP_PREFIX = "default_pg/0/"
OUTSIDER_DONE = "test/outsider_done"


def ddp_job(backend, rank):
    """A few SGD steps of an MLP under DDP; each rank starts from its own initialisation (DDP
    must broadcast rank 0's) and trains on its own shard. Returns the final parameters."""
    torch.manual_seed(100 + rank)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(7 + rank)
    for _ in range(STEPS):
        x = torch.randn(16, 8, generator=data)
        y = torch.randint(0, 4, (16,), generator=data)
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


def refusal(call):
    try:
        call()
        return "no error"
    except RuntimeError as e:
        return str(e)


def store_client(port):
    """A client of the rendezvous's TCPStore, as anyone who reaches MASTER_PORT may make one."""
    return dist.TCPStore("127.0.0.1", int(port), None, False, PATIENCE, wait_for_workers=False)


def child(out_dir):
    rank = int(os.environ["RANK"])
    dist.init_process_group("dtrain")
    if rank == 0:
        # The Store lives in this process: it stays up until the outsider has read it.
        store_client(os.environ["MASTER_PORT"]).wait([OUTSIDER_DONE])
    results = {"backend": dist.get_backend()}
    summed = torch.arange(1001, dtype=torch.float32) * (rank + 1)
    dist.all_reduce(summed)
    results["sum"] = summed
    averaged = torch.full((7,), float(rank * 2 + 1))
    dist.all_reduce(averaged, op=dist.ReduceOp.AVG)
    results["avg"] = averaged
    broadcast = torch.full((3, 3), rank, dtype=torch.int64)
    broadcast[0, 0] = (1 << 53) + rank  # no float holds it: the bytes travel as they are
    dist.broadcast(broadcast, src=1)
    results["broadcast"] = broadcast
    gathered = [torch.empty(5, dtype=torch.float64) for _ in range(WORLD)]
    dist.all_gather(gathered, torch.full((5,), rank + 0.25, dtype=torch.float64))
    results["gathered"] = gathered
    into = torch.empty(WORLD * 3, dtype=torch.int32)
    dist.all_gather_into_tensor(into, torch.full((3,), rank + 10, dtype=torch.int32))
    results["gathered_into"] = into
    dist.barrier()
    results["refused_dtype"] = refusal(lambda: dist.all_reduce(torch.ones(3, dtype=torch.float64)))
    results["refused_op"] = refusal(lambda: dist.all_reduce(torch.ones(3), op=dist.ReduceOp.MAX))
    results["dtrain_params"] = ddp_job("dtrain", rank)
    dist.destroy_process_group()

    os.environ["MASTER_PORT"] = os.environ["GLOO_PORT"]
    dist.init_process_group("gloo")
    results["gloo_params"] = ddp_job("gloo", rank)
    dist.destroy_process_group()
    torch.save(results, os.path.join(out_dir, "rank%d.pt" % rank))


def read_store_as_an_outsider(port):
    """What torch's Store holds of dtrain's for the default group, read with torch's own client
    once both ranks have published their addresses (each rank writes its key, and rank 0 the
    boxes, before that): {key: bytes, or None for a key that is not there}."""
    store = store_client(port)
    try:
        store.wait([GROUP_PREFIX + "dtrain/address/%d" % r for r in range(WORLD)])
        # torch 1.13's client cannot ask whether a key exists without waiting for it; deleting
        # one answers exactly, and these are keys no rank may have written (the secret itself,
        # where rank 0 once put it, and a box for rank 0, which draws the secret).
        found = {key: b"(present)" if store.delete_key(GROUP_PREFIX + key) else None
                 for key in ("dtrain/secret", "dtrain/sealed/0")}
        if found["dtrain/secret"] is not None:
            return found  # the secret in the clear, and nothing else of the agreement to wait for
        present = ["dtrain/%s/%d" % (kind, r) for kind in ("address", "key") for r in range(WORLD)]
        present += ["dtrain/sealed/%d" % r for r in range(1, WORLD)]
        found.update({key: store.get(GROUP_PREFIX + key) for key in present})
        return found
    finally:
        store.set(OUTSIDER_DONE, "1")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


class TwoRanksTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        ports = {"MASTER_PORT": free_port(), "GLOO_PORT": free_port()}
        procs = []
        for r in range(WORLD):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(r),
                       LOCAL_WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1", OMP_NUM_THREADS="1",
                       **ports)
            env.pop("DTRAIN_SECRET", None)  # the ranks agree on one through the Store
            procs.append(subprocess.Popen([sys.executable, __file__, "--child", cls.dir.name],
                                          env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT))
        try:
            cls.store = read_store_as_an_outsider(ports["MASTER_PORT"])
        except Exception as error:  # reported by the test that reads it, after the ranks' output
            cls.store = error
        cls.outputs = []
        for p in procs:
            out, _ = p.communicate(timeout=240)
            cls.outputs.append((p.returncode, out.decode(errors="replace")))
        cls.results = []
        for r in range(WORLD):
            path = os.path.join(cls.dir.name, "rank%d.pt" % r)
            cls.results.append(torch.load(path) if os.path.exists(path) else None)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def setUp(self):
        for r, (code, out) in enumerate(self.outputs):
            self.assertEqual(code, 0, "rank %d:\n%s" % (r, out))

    def test_the_group_runs_on_the_dtrain_backend(self):
        self.assertEqual(self.results[0]["backend"], "dtrain")

    def test_all_reduce_sums_and_averages(self):
        for r, result in enumerate(self.results):
            self.assertTrue(torch.equal(result["sum"], torch.arange(1001, dtype=torch.float32) * 3),
                            "rank %d" % r)
            self.assertTrue(torch.equal(result["avg"], torch.full((7,), 2.0)), "rank %d" % r)

    def test_broadcast_copies_the_source_ranks_bytes(self):
        expected = torch.full((3, 3), 1, dtype=torch.int64)
        expected[0, 0] = (1 << 53) + 1
        for result in self.results:
            self.assertTrue(torch.equal(result["broadcast"], expected))

    def test_all_gather_puts_every_ranks_tensor_in_rank_order(self):
        for result in self.results:
            for r, t in enumerate(result["gathered"]):
                self.assertTrue(torch.equal(t, torch.full((5,), r + 0.25, dtype=torch.float64)))

    def test_all_gather_into_tensor_fills_one_buffer_in_rank_order(self):
        expected = torch.tensor([10, 10, 10, 11, 11, 11], dtype=torch.int32)
        for result in self.results:
            self.assertTrue(torch.equal(result["gathered_into"], expected))

    def test_what_it_does_not_support_is_named(self):
        self.assertIn("float32", self.results[0]["refused_dtype"])
        self.assertIn("Double", self.results[0]["refused_dtype"])
        self.assertIn("ReduceOp.SUM and ReduceOp.AVG", self.results[0]["refused_op"])

    def test_the_store_holds_addresses_public_keys_and_sealed_boxes_but_never_the_secret(self):
        self.assertIsInstance(self.store, dict, "reading the Store failed: %r" % (self.store,))
        # What rank 0 once wrote there in the clear, for anyone who reached MASTER_PORT to read.
        self.assertIsNone(self.store["dtrain/secret"])
        for r in range(WORLD):
            self.assertRegex(self.store["dtrain/address/%d" % r].decode(), r"^127\.0\.0\.1:[0-9]+$")
            self.assertEqual(len(self.store["dtrain/key/%d" % r]), 32, "an X25519 public key")
        self.assertNotEqual(self.store["dtrain/key/0"], self.store["dtrain/key/1"])
        self.assertIsNone(self.store["dtrain/sealed/0"], "rank 0 draws the secret: no box for it")
        # 64 hex digits of secret and a 16-byte tag, sealed: no run of hex digits in it.
        box = self.store["dtrain/sealed/1"]
        self.assertEqual(len(box), 64 + 16)
        self.assertNotRegex(box, rb"[0-9a-f]{16}")

    def test_ddp_ranks_agree_and_match_gloo(self):
        ours = [result["dtrain_params"] for result in self.results]
        gloo = [result["gloo_params"] for result in self.results]
        for mine, other in zip(ours[0], ours[1]):
            self.assertTrue(torch.equal(mine, other), "the ranks' parameters differ")
        for mine, theirs in zip(ours[0], gloo[0]):
            self.assertLessEqual((mine - theirs).abs().max().item(), 1e-4)
        # And training moved them: equal by construction would prove nothing.
        torch.manual_seed(100)
        untrained = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                        torch.nn.Linear(16, 4))
        self.assertGreater((ours[0][0] - untrained[0].weight.detach()).abs().max().item(), 1e-3)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        unittest.main()
