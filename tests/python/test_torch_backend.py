"""The "dtrain" backend of torch.distributed: two real processes under torchrun-style variables;
all_reduce, broadcast, all_gather and barrier results; refusals of what it does not support; and
the same small DistributedDataParallel job over dtrain and over Gloo, whose parameters must agree
within 1e-4. Skipped (exit 77) where torch or this build's backend is missing."""
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


def child(out_dir):
    rank = int(os.environ["RANK"])
    dist.init_process_group("dtrain")
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
            procs.append(subprocess.Popen([sys.executable, __file__, "--child", cls.dir.name],
                                          env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT))
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
