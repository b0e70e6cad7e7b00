#!/usr/bin/env python3
"""What --metrics_port costs (issue 36): a training run's throughput with the endpoint on and
scraped every second, against the same run without it, interleaved, side by side.

    python3 bench/metrics_cost.py --dtrain build/dtrain --rounds 3
    python3 bench/metrics_cost.py --strategy allreduce --workers 2 --model mlp --steps 20000

Under a local cluster (--strategy, --workers) every task's page is scraped every second, and the
throughput is the chief's aggregate line.

On a machine of two cores or more a local run is pinned to core 0 with one thread, and this
script, which scrapes, to core 1 (--no-pin: neither): the figure is then what serving the page
costs the training, not what the scraper's own work takes from a machine that training fills.
Prometheus scrapes from another machine.
"""
import os
import argparse
import re
import statistics
import subprocess
import threading
import time
import urllib.request


def run(args, metrics):
    flags = [args.dtrain, "train", "--model", args.model, "--train_steps", str(args.steps),
             "--log_every", "0", "--seed", "7"]
    if args.strategy:
        flags += ["--strategy", args.strategy, "--workers", str(args.workers)]
    if pinned(args):
        flags = ["taskset", "-c", "0"] + flags + ["--threads", "1"]
    if args.data_dir:
        flags += ["--data_dir", args.data_dir]
    if metrics:
        flags += ["--metrics_port", "0"]
    p = subprocess.Popen(flags, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         bufsize=1)
    scrapes, stop, lines = [0], threading.Event(), []

    def scrape(url):
        while not stop.wait(1.0):
            try:
                urllib.request.urlopen(url, timeout=5).read()
                scrapes[0] += 1
            except OSError:
                return

    scrapers = []
    for line in p.stdout:
        lines.append(line)
        m = re.search(r"metrics at (http://\S+)", line)
        if m:
            scrapers.append(threading.Thread(target=scrape, args=(m.group(1),)))
            scrapers[-1].start()
    stop.set()
    for scraper in scrapers:
        scraper.join()
    if p.wait() != 0:
        raise RuntimeError("".join(lines[-20:]))
    for line in lines:
        m = re.search(r"aggregate: [0-9]+ global steps in [0-9.]+ s, ([0-9.]+) examples/sec", line)
        if args.strategy and m:
            return float(m.group(1)), scrapes[0]
        m = re.search(r"[Tt]raining elapsed time: [0-9.]+ s \([0-9]+ (?:local )?steps, ([0-9.]+) examples/sec", line)
        if not args.strategy and m:
            return float(m.group(1)), scrapes[0]
    raise RuntimeError("no throughput line:\n" + "".join(lines[-20:]))


def pinned(args):
    return not args.no_pin and not args.strategy and os.cpu_count() >= 2


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtrain", default="build/dtrain")
    parser.add_argument("--data_dir", default="")
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--steps", type=int, default=30000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--strategy", default="", help="a local cluster's: allreduce, async, sync")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-pin", action="store_true", help="leave the processes unpinned")
    args = parser.parse_args()
    if pinned(args):
        os.sched_setaffinity(0, {1})
    ratios = []
    for r in range(args.rounds):
        off, _ = run(args, False)
        on, scrapes = run(args, True)
        ratios.append(on / off)
        print(f"round {r + 1}: {off:.0f} examples/sec without, {on:.0f} with the endpoint scraped "
              f"{scrapes} times: {on / off:.3f}", flush=True)
    print(f"median of {args.rounds}: {statistics.median(ratios):.3f}x (min {min(ratios):.3f})")


if __name__ == "__main__":
    main()
