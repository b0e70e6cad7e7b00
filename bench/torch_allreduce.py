"""torch.distributed over the "dtrain" backend against Gloo, side by side in one sitting: the bus
bandwidth of all_reduce (float32, sum) and the time of a DistributedDataParallel training step on
an MLP. Each rank holds a group of each backend (Gloo the default, dtrain through new_group), and
the rounds alternate between them, so that both see the same machine; the median of the rounds is
reported.

    PYTHONPATH=build/python /usr/bin/python3 bench/torch_allreduce.py [--ranks 2] [--mib 16]
        [--rounds 5] [--iters 20] [--steps 20]

It starts the ranks itself, with torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT); under torchrun it is one of them. busbw = algbw x 2(n-1)/n, as NCCL's and Gloo's
benchmarks report it; GB/s = 1e9 bytes/s.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

import torch
import torch.distributed as dist

import dtrain.torch  # noqa: F401  (registers the backend)


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--mib", type=float, default=16.0, help="all_reduce size in MiB")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds per backend")
    p.add_argument("--iters", type=int, default=20, help="all_reduces per round")
    p.add_argument("--steps", type=int, default=20, help="DDP steps per round")
    p.add_argument("--hidden", type=int, default=1024, help="the MLP's hidden width")
    p.add_argument("--batch", type=int, default=64)
    return p.parse_args()


def time_allreduce(group, data, iters):
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(data, group=group)
    seconds = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float32)
    dist.all_reduce(seconds, group=group)  # the ranks' mean
    return seconds.item() / dist.get_world_size()


def ddp_model(args, group):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, args.hidden), torch.nn.ReLU(),
                                torch.nn.Linear(args.hidden, args.hidden), torch.nn.ReLU(),
                                torch.nn.Linear(args.hidden, 10))
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
    return ddp, torch.optim.SGD(ddp.parameters(), lr=0.01)


def time_ddp(ddp, optimizer, group, x, y, steps):
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(steps):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        optimizer.step()
    seconds = torch.tensor([(time.perf_counter() - start) / steps], dtype=torch.float32)
    dist.all_reduce(seconds, group=group)
    return seconds.item() / dist.get_world_size()


def rank_main(args):
    torch.set_num_threads(1)  # the ranks share the host's cores
    dist.init_process_group("gloo")
    groups = {"gloo": dist.group.WORLD, "dtrain": dist.new_group(backend="dtrain")}
    n = dist.get_world_size()
    rank = dist.get_rank()
    data = torch.zeros(int(args.mib * (1 << 20)) // 4, dtype=torch.float32)
    nbytes = data.numel() * 4
    busbw = {name: [] for name in groups}
    for name, group in groups.items():  # warm-up: buffers grown, links settled
        time_allreduce(group, data, 2)
    for _ in range(args.rounds):
        for name, group in groups.items():
            seconds = time_allreduce(group, data, args.iters)
            busbw[name].append(nbytes / seconds / 1e9 * 2 * (n - 1) / n)

    torch.manual_seed(1 + rank)
    x = torch.randn(args.batch, 784)
    y = torch.randint(0, 10, (args.batch,))
    models = {name: ddp_model(args, group) for name, group in groups.items()}
    step_ms = {name: [] for name in groups}
    for name, (ddp, optimizer) in models.items():
        time_ddp(ddp, optimizer, groups[name], x, y, 2)
    for _ in range(args.rounds):
        for name, (ddp, optimizer) in models.items():
            step_ms[name].append(time_ddp(ddp, optimizer, groups[name], x, y, args.steps) * 1e3)
    if rank == 0:
        params = sum(p.numel() for p in models["gloo"][0].parameters())
        print("torch %s, %d ranks on one host, %d thread(s) each; medians of %d alternating rounds"
              % (torch.__version__, n, torch.get_num_threads(), args.rounds))
        print("all_reduce of %.0f MiB float32, %d per round:" % (args.mib, args.iters))
        for name in groups:
            print("  %-7s busbw %6.2f GB/s   (rounds: %s)" % (
                name, statistics.median(busbw[name]),
                " ".join("%.2f" % b for b in busbw[name])))
        print("  dtrain / gloo: %.2fx" % (statistics.median(busbw["dtrain"]) /
                                           statistics.median(busbw["gloo"])))
        print("DDP step, MLP 784-%d-%d-10 (%d parameters), batch %d per rank, SGD, %d per round:"
              % (args.hidden, args.hidden, params, args.batch, args.steps))
        for name in groups:
            print("  %-7s %7.2f ms/step   (rounds: %s)" % (
                name, statistics.median(step_ms[name]),
                " ".join("%.2f" % s for s in step_ms[name])))
        print("  gloo / dtrain: %.2fx" % (statistics.median(step_ms["gloo"]) /
                                           statistics.median(step_ms["dtrain"])))
    dist.destroy_process_group()


def launch(args):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    procs = []
    for r in range(args.ranks):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.ranks), LOCAL_RANK=str(r),
                   LOCAL_WORLD_SIZE=str(args.ranks), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(subprocess.Popen([sys.executable] + sys.argv, env=env))
    return max(p.wait() for p in procs)


if __name__ == "__main__":
    arguments = parse()
    sys.exit(rank_main(arguments) if "RANK" in os.environ else launch(arguments))
