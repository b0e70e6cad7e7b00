#!/usr/bin/env python3
"""The elastic figures of docs/benchmarks.md (issue 35), all-reduce or sync.

Runs `dtrain train --strategy allreduce --workers 3 --min_workers 2 --max_restarts 1` (or
`--strategy sync`, one ps task) with a step
line for every step, SIGKILLs worker1 at a step, and times from the receiving end of the launcher's
output: from the kill to the survivors' next step line, and from the launcher's restart of worker1
to the restarted worker's first step line. Each elastic run is paired with an uninterrupted run of
the same job, and their test accuracies are compared. Medians of --rounds rounds.

    python3 bench/elastic_recovery.py --dtrain build/dtrain --rounds 5
    python3 bench/elastic_recovery.py --dtrain build/dtrain --rounds 5 --strategy sync
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import time


def worker_pid(launcher_pid, index):
    """The launcher's child whose command line says --task_index index."""
    for task in os.listdir(f"/proc/{launcher_pid}/task"):
        with open(f"/proc/{launcher_pid}/task/{task}/children") as f:
            for pid in f.read().split():
                with open(f"/proc/{pid}/cmdline", "rb") as c:
                    args = c.read().split(b"\0")
                for i in range(len(args) - 1):
                    if args[i] == b"--task_index" and args[i + 1] == str(index).encode():
                        return int(pid)
    raise RuntimeError(f"no worker{index} under the launcher {launcher_pid}")


def job(args, elastic):
    flags = [args.dtrain, "train", "--strategy", args.strategy, "--workers", "3",
             "--model", args.model, "--train_steps", str(args.steps), "--log_every", "1",
             "--seed", "7"]
    if args.data_dir:
        flags += ["--data_dir", args.data_dir]
    if elastic:
        flags += ["--min_workers", "2", "--max_restarts", "1"]
    return flags


def accuracy(lines):
    for line in lines:
        m = re.search(r"\[worker0\] worker=0: test accuracy = ([0-9.]+)", line)
        if m:
            return float(m.group(1))
    raise RuntimeError("no test accuracy from worker0:\n" + "".join(lines[-30:]))


def elastic_round(args):
    p = subprocess.Popen(job(args, True), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, bufsize=1)
    lines, t_kill, t_recovered, t_restart, t_joined = [], None, None, None, None
    # The survivors' next step: all-reduce, once their ring has re-formed; sync, once the ps has
    # counted worker1 out.
    changed = ("[worker0] worker0: membership view 2" if args.strategy == "allreduce"
               else "[worker0] worker0: worker1 left at step")
    view2_seen = False
    for line in p.stdout:
        now = time.monotonic()
        lines.append(line)
        if t_kill is None and line.startswith("[worker1] worker=1, epoch=") and \
                f"local_step={args.kill_at}," in line:
            os.kill(worker_pid(p.pid, 1), signal.SIGKILL)
            t_kill = time.monotonic()
        elif t_kill is not None:
            if line.startswith(changed):
                view2_seen = True
            elif view2_seen and t_recovered is None and line.startswith("[worker0] worker=0, epoch="):
                t_recovered = now
            elif line.startswith("[launcher] worker1 was killed"):
                t_restart = now
            elif t_restart is not None and t_joined is None and \
                    line.startswith("[worker1] worker=1, epoch="):
                t_joined = now
    if p.wait() != 0:
        raise RuntimeError("the elastic run failed:\n" + "".join(lines[-40:]))
    return t_recovered - t_kill, t_joined - t_restart, accuracy(lines)


def uninterrupted(args):
    r = subprocess.run(job(args, False), capture_output=True, text=True, check=True)
    return accuracy(r.stdout.splitlines(keepends=True))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtrain", default="build/dtrain")
    parser.add_argument("--data_dir", default="")
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--kill_at", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--strategy", choices=["allreduce", "sync"], default="allreduce")
    args = parser.parse_args()
    recovery, join, gaps = [], [], []
    for r in range(args.rounds):
        to_next_step, to_first_step, elastic_accuracy = elastic_round(args)
        plain_accuracy = uninterrupted(args)
        recovery.append(to_next_step)
        join.append(to_first_step)
        gaps.append(abs(elastic_accuracy - plain_accuracy))
        print(f"round {r + 1}: kill to the survivors' next step {to_next_step:.3f} s; restart to "
              f"the joiner's first step {to_first_step:.3f} s; test accuracy {elastic_accuracy:.4f} "
              f"elastic, {plain_accuracy:.4f} uninterrupted", flush=True)
    print(f"median of {args.rounds}: kill to next step {statistics.median(recovery):.3f} s "
          f"(max {max(recovery):.3f}); joiner start to first step {statistics.median(join):.3f} s; "
          f"accuracy difference {statistics.median(gaps):.4f} (max {max(gaps):.4f})")


if __name__ == "__main__":
    main()
