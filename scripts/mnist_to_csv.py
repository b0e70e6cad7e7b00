#!/usr/bin/env python3
"""Writes MNIST's IDX files as CSV in Kaggle's layout: a header `label,pixel0,...,pixel783`, then
one row per image, the label first and the raw 0-255 pixel values after it.

Usage: scripts/mnist_to_csv.py MNIST_DIR OUT_DIR [--no-labels]
Writes OUT_DIR/train.csv and OUT_DIR/test.csv (with --no-labels, OUT_DIR/test_pixels.csv too:
the test images without the label column, as inference data comes). Reproduces the figures of
docs/data.md ("Kaggle's MNIST CSV"); needs numpy.
"""
import os
import sys

import numpy as np


def read_idx(path):
    with open(path, "rb") as f:
        data = f.read()
    rank = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def write_csv(path, images, labels):
    pixels = images.reshape(len(images), -1)
    header = ",".join(f"pixel{i}" for i in range(pixels.shape[1]))
    table = pixels if labels is None else np.column_stack([labels, pixels])
    np.savetxt(path, table, fmt="%d", delimiter=",",
               header=header if labels is None else "label," + header, comments="")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    mnist, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for name, prefix in (("train", "train"), ("test", "t10k")):
        images = read_idx(os.path.join(mnist, f"{prefix}-images-idx3-ubyte"))
        labels = read_idx(os.path.join(mnist, f"{prefix}-labels-idx1-ubyte"))
        write_csv(os.path.join(out, f"{name}.csv"), images, labels)
        if name == "test" and "--no-labels" in sys.argv[3:]:
            write_csv(os.path.join(out, "test_pixels.csv"), images, None)


if __name__ == "__main__":
    main()
