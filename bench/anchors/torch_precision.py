#!/usr/bin/python3
"""PyTorch reference for `dtrain bench train --precision fp32|bf16`: the same built-in models'
training steps in PyTorch, in fp32 and under torch.autocast("cpu", dtype=torch.bfloat16), the way a
PyTorch user asks for bf16 mixed precision on a CPU (Debian's python3-torch 1.13: its autocast
sends linear layers and convolutions to oneDNN 2.6's bf16 kernels, AMX where the CPU has it).

Run with Debian's /usr/bin/python3, in the same sitting as dtrain's runs, interleaved:

  torch_precision.py --model mnist_inference --precision fp32 --threads 2
  torch_precision.py --model mnist_inference --precision bf16 --threads 2
  torch_precision.py --model lenet --precision bf16
  torch_precision.py --model mlp --hidden_units 4096 --precision bf16

Models, as src/nn/models/*.json define them, with their recipes' optimizers:
  mnist_inference  784-500(ReLU)-10, SGD
  mlp              784-H(ReLU)-10 (--hidden_units, 100 by default), Adam
  lenet            conv 5x5x32 'same' ReLU, max pool 2, conv 5x5x64 'same' ReLU, max pool 2,
                   dense 1024 ReLU, dense 10, Adam
The loss is the mean cross-entropy of the batch, in fp32 (autocast computes it so). The data is
uniform noise: a step costs the same whatever the pixels. The learning rate is kept small so that
the weights stay finite; the cost does not depend on it. dtrain's step also keeps a moving average
of the weights (the recipes' moving_average_decay), which this one does not: PyTorch does less.

Prints one 'RESULT {json}' line: examples/sec, median (and range) of --reps windows of --secs.
"""
import argparse
import json
import os
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="mnist_inference", choices=["mnist_inference", "mlp", "lenet"])
    p.add_argument("--hidden_units", type=int, default=100, help="mlp's hidden layer")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--blas_threads", type=int, default=None,
                   help="OpenBLAS's own threads, which torch.set_num_threads does not set (default: "
                        "--threads); Debian's torch runs its fp32 products on OpenBLAS")
    p.add_argument("--optimizer", default=None, choices=["sgd", "adam"], help="default: the recipe's")
    p.add_argument("--secs", type=float, default=2.0, help="seconds per window")
    p.add_argument("--reps", type=int, default=5, help="windows; the median is reported")
    return p.parse_args()


def make_model(torch, args):
    nn = torch.nn
    if args.model == "mnist_inference":
        return nn.Sequential(nn.Linear(784, 500), nn.ReLU(), nn.Linear(500, 10)), "sgd"
    if args.model == "mlp":
        return nn.Sequential(nn.Linear(784, args.hidden_units), nn.ReLU(),
                             nn.Linear(args.hidden_units, 10)), "adam"
    return nn.Sequential(
        nn.Unflatten(1, (1, 28, 28)),
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 1024), nn.ReLU(), nn.Linear(1024, 10)), "adam"


def main():
    args = parse_args()
    blas_threads = args.blas_threads or args.threads
    os.environ["OPENBLAS_NUM_THREADS"] = str(blas_threads)  # read when OpenBLAS loads, with torch
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, recipe_optimizer = make_model(torch, args)
    optimizer = args.optimizer or recipe_optimizer
    if optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.rand(args.batch, 784)
    y = torch.randint(0, 10, (args.batch,))
    bf16 = args.precision == "bf16"

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(x)
        loss = F.cross_entropy(logits.float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    # The first steps make oneDNN's primitives for each shape.
    start = time.perf_counter()
    while time.perf_counter() - start < 0.5:
        step()
    rates = []
    for _ in range(args.reps):
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < args.secs:
            step()
            steps += 1
        rates.append(steps * args.batch / (time.perf_counter() - start))
    rates.sort()
    result = {"model": args.model, "hidden_units": args.hidden_units if args.model == "mlp" else None,
              "precision": args.precision, "optimizer": optimizer, "batch": args.batch,
              "threads": args.threads, "blas_threads": blas_threads, "examples_per_s_median": round(rates[len(rates) // 2], 1),
              "examples_per_s_min": round(rates[0], 1), "examples_per_s_max": round(rates[-1], 1),
              "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA"), "torch": torch.__version__}
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
