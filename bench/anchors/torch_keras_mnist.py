#!/usr/bin/python3
"""PyTorch reference for dtrain's --model FILE.json: read a Keras Sequential architecture as Keras'
model.to_json() writes it (Keras 2 or Keras 3 shape), build the same network in torch.nn and train it
on MNIST or Fashion-MNIST with the recipe given on the command line.

Written independently of dtrain's C++ reader, so the two can be compared: same file, same recipe,
same epochs -> test accuracies should agree to within run-to-run noise.

Run with Debian's /usr/bin/python3 (python3-torch, CPU):

  torch_keras_mnist.py --model examples/models/cnn_mnist.keras3.json --data ~/.cache/dtrain/mnist \\
      --optimizer adam --lr 1e-3 --batch 200 --epochs 3 --seed 1 --threads 1
  torch_keras_mnist.py --model examples/models/mlp_tanh_dropout.keras2.json --data DIR --epochs 5
  torch_keras_mnist.py --model FILE.json --describe          # print the parsed network and exit

Semantics (Keras' and TensorFlow's, not PyTorch's defaults):
  * Data: the four IDX files (raw or .gz) in --data; pixels / 255 as float32, 784 per example. The
    first --validation_size (default 5000) training examples are held out, as TensorFlow's
    read_data_sets does, so training uses the remaining 55000; the test set is all 10000.
  * Layout: tensors are NHWC as in Keras (channels_last). Reshape(28,28,1) of the 784 floats gives
    (N,28,28,1); internally 4-D tensors are kept NCHW for torch's convolutions and permuted back to
    NHWC before Flatten or a Reshape, so Flatten's order is Keras' (h, w, c) order.
  * Conv2D/pooling padding 'same' is TensorFlow's: total = max((ceil(H/s)-1)*s + k - H, 0), with the
    smaller half before and the larger after (symmetric for odd kernels and stride 1); average
    pooling with 'same' divides by the number of real (unpadded) elements, max pooling ignores pads.
  * Initialisation as Keras: GlorotUniform kernels, limit sqrt(6/(fan_in+fan_out)) with Keras' fans
    (Dense: fan_in=in, fan_out=units; Conv2D: fan_in=kh*kw*cin, fan_out=kh*kw*filters), Zeros biases.
    The torch weights are drawn in Keras' kernel shape ((in, out) / (kh, kw, cin, cout)) and then
    transposed, so the same seed gives the same draw order whatever the layout.
  * A softmax activation on the last layer (Dense activation or a final Activation layer) is taken
    off and the loss is the mean softmax cross-entropy on the logits.
  * An L2 kernel_regularizer l2 adds l2 * sum(W^2) to the loss (Keras' definition, no 1/2): done as
    weight_decay = 2*l2 on that kernel only, which is the same gradient for SGD and Adam.
  * Dropout is inverted dropout (kept units scaled by 1/(1-rate)), off at evaluation.
  * BatchNormalization (last axis, both gamma and beta) is torch's BatchNorm1d/2d with Keras'
    epsilon and torch momentum = 1 - Keras momentum; evaluation uses the running statistics.

Recipe: --optimizer sgd|adam, --lr, --batch (global batch: dtrain's --batch_size B with --workers 2
is --batch 2B here), --epochs, --seed, --threads (default 1). Each epoch reshuffles the training set
and drops the last incomplete batch. Test accuracy is evaluated after every epoch (dropout off).
Prints one line per epoch and a final 'RESULT {json}' line.
"""
import argparse
import gzip
import json
import math
import os
import struct
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="Keras model.to_json() file (Keras 2 or Keras 3 shape)")
    p.add_argument("--data", default=None, help="folder with the four IDX files (raw or .gz)")
    p.add_argument("--validation_size", type=int, default=5000,
                   help="first N training examples held out (TensorFlow read_data_sets)")
    p.add_argument("--optimizer", default="adam", choices=["sgd", "adam"])
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--momentum", type=float, default=0.0, help="sgd only")
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.999)
    p.add_argument("--epsilon", type=float, default=1e-8, help="Adam epsilon (TensorFlow 1.x default 1e-8)")
    p.add_argument("--batch", type=int, default=200, help="global batch size")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="torch and OpenBLAS threads")
    p.add_argument("--eval_batch", type=int, default=1000, help="examples per forward pass at evaluation")
    p.add_argument("--describe", action="store_true", help="print the parsed network and parameter count, exit")
    p.add_argument("--json_out", default=None, help="append the RESULT json to this file")
    p.add_argument("--tag", default="", help="free text copied into the RESULT json")
    args = p.parse_args(argv)
    if not args.describe and not args.data:
        p.error("--data is required unless --describe")
    return args


if __name__ == "__main__":
    _ARGS = parse_args()
    # Before torch (and OpenBLAS) load: their thread pools read these once.
    os.environ["OMP_NUM_THREADS"] = str(_ARGS.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(_ARGS.threads)
    os.environ["MKL_NUM_THREADS"] = str(_ARGS.threads)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


# ---------------------------------------------------------------------------------------------------
# Keras JSON -> a flat list of layer specs
# ---------------------------------------------------------------------------------------------------

class ModelFileError(Exception):
    pass


def _tuple2(v, what):
    if isinstance(v, int):
        return (v, v)
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, int) for x in v):
        return (v[0], v[1])
    raise ModelFileError(f"{what}: expected an int or a list of 2 ints, got {v!r}")


def _object_name(obj, what):
    """Initializers/regularizers: a Keras 2 {"class_name", "config"} or Keras 3 {"module", "class_name",
    "config", "registered_name"} object, or a bare string identifier."""
    if obj is None:
        return None, {}
    if isinstance(obj, str):
        return obj, {}
    if isinstance(obj, dict) and "class_name" in obj:
        return obj["class_name"], obj.get("config") or {}
    raise ModelFileError(f"{what}: unrecognised value {obj!r}")


def _dtype_ok(d, where):
    # Keras 2: "float32"; Keras 3: a DTypePolicy object {"class_name": "DTypePolicy", "config": {"name": ...}}.
    name = d.get("config", {}).get("name") if isinstance(d, dict) else d
    if name not in (None, "float32"):
        raise ModelFileError(f"{where}: dtype {name!r} is not supported (float32 only)")


ACTIVATIONS = ("relu", "tanh", "sigmoid", "softmax", "linear")


def load_keras_json(path):
    """Returns (format, input_shape without batch, [layer spec dicts])."""
    with open(path) as f:
        top = json.load(f)
    if isinstance(top, dict) and "model_config" in top:  # tolerate a wrapped {"model_config": ...}
        top = top["model_config"]
    if not isinstance(top, dict) or top.get("class_name") != "Sequential":
        raise ModelFileError(f"{path}: top-level class_name must be 'Sequential'")
    fmt = "keras3" if "module" in top else "keras2"
    cfg = top.get("config")
    layers = cfg.get("layers") if isinstance(cfg, dict) else cfg  # very old Keras 2: config is the list
    if not isinstance(layers, list) or not layers:
        raise ModelFileError(f"{path}: config.layers must be a non-empty list")
    if isinstance(cfg, dict):
        _dtype_ok(cfg.get("dtype"), "Sequential")

    input_shape = None
    specs = []
    for i, layer in enumerate(layers):
        cls = layer.get("class_name")
        c = layer.get("config", {})
        where = f"layer {i} ({cls} '{c.get('name')}')"
        if cls == "InputLayer":
            shape = c.get("batch_shape", c.get("batch_input_shape"))
            if i != 0 or shape is None:
                raise ModelFileError(f"{where}: an InputLayer with a shape must come first")
            input_shape = tuple(shape[1:])
            _dtype_ok(c.get("dtype"), where)
            continue
        if "batch_input_shape" in c and input_shape is None:  # Keras 2 first layer given input_shape=
            input_shape = tuple(c["batch_input_shape"][1:])
        _dtype_ok(c.get("dtype"), where)
        if c.get("activity_regularizer") is not None:
            raise ModelFileError(f"{where}: activity_regularizer is not supported")
        if c.get("data_format", "channels_last") != "channels_last":
            raise ModelFileError(f"{where}: only channels_last is supported")
        spec = {"type": cls, "name": c.get("name")}
        if cls in ("Dense", "Conv2D"):
            act = c.get("activation", "linear")
            if act not in ACTIVATIONS:
                raise ModelFileError(f"{where}: activation {act!r} is not supported")
            kinit, kcfg = _object_name(c.get("kernel_initializer", "GlorotUniform"), where)
            binit, _ = _object_name(c.get("bias_initializer", "Zeros"), where)
            if kinit not in ("GlorotUniform", "glorot_uniform"):
                raise ModelFileError(f"{where}: kernel_initializer {kinit!r} is not supported")
            if binit not in ("Zeros", "zeros"):
                raise ModelFileError(f"{where}: bias_initializer {binit!r} is not supported")
            if kcfg.get("seed") is not None:
                raise ModelFileError(f"{where}: a seeded initializer is not supported")
            reg, rcfg = _object_name(c.get("kernel_regularizer"), where)
            l2 = 0.0
            if reg is not None:
                if reg in ("L2", "l2"):
                    l2 = float(rcfg.get("l2", 0.01))
                elif reg in ("L1L2", "l1_l2") and float(rcfg.get("l1", 0.0)) == 0.0:
                    l2 = float(rcfg.get("l2", 0.0))
                else:
                    raise ModelFileError(f"{where}: kernel_regularizer {reg!r} is not supported")
            for k in ("bias_regularizer", "kernel_constraint", "bias_constraint"):
                if c.get(k) is not None:
                    raise ModelFileError(f"{where}: {k} is not supported")
            if c.get("quantization_config") is not None or c.get("lora_rank"):
                raise ModelFileError(f"{where}: quantization/LoRA is not supported")
            spec.update(activation=act, use_bias=bool(c.get("use_bias", True)), l2=l2)
            if cls == "Dense":
                spec["units"] = int(c["units"])
            else:
                if _tuple2(c.get("dilation_rate", 1), where) != (1, 1) or c.get("groups", 1) != 1:
                    raise ModelFileError(f"{where}: dilation and groups are not supported")
                spec.update(filters=int(c["filters"]), kernel=_tuple2(c["kernel_size"], where),
                            strides=_tuple2(c.get("strides", 1), where), padding=c.get("padding", "valid"))
        elif cls in ("MaxPooling2D", "AveragePooling2D"):
            pool = _tuple2(c.get("pool_size", 2), where)
            strides = c.get("strides")
            spec.update(pool=pool, strides=pool if strides is None else _tuple2(strides, where),
                        padding=c.get("padding", "valid"))
        elif cls == "Flatten":
            pass
        elif cls == "Reshape":
            spec["target_shape"] = tuple(int(x) for x in c["target_shape"])
        elif cls == "Dropout":
            if c.get("noise_shape") is not None:
                raise ModelFileError(f"{where}: noise_shape is not supported")
            spec["rate"] = float(c["rate"])
        elif cls == "BatchNormalization":
            axis = c.get("axis", -1)
            axis = axis[0] if isinstance(axis, list) and len(axis) == 1 else axis
            if not isinstance(axis, int) or (axis != -1 and axis < 1):
                raise ModelFileError(f"{where}: axis {c.get('axis')!r} is not supported (only the last)")
            if not c.get("center", True) or not c.get("scale", True):
                raise ModelFileError(f"{where}: center/scale false is not supported")
            for k in ("renorm", "synchronized"):
                if c.get(k):
                    raise ModelFileError(f"{where}: {k} is not supported")
            for k in ("beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint",
                      "virtual_batch_size", "adjustment"):
                if c.get(k) is not None:
                    raise ModelFileError(f"{where}: {k} is not supported")
            spec.update(axis=axis, momentum=float(c.get("momentum", 0.99)),
                        epsilon=float(c.get("epsilon", 1e-3)))
        elif cls == "Activation":
            if c.get("activation") not in ACTIVATIONS:
                raise ModelFileError(f"{where}: activation {c.get('activation')!r} is not supported")
            spec["activation"] = c["activation"]
        else:
            raise ModelFileError(f"{where}: layer type {cls!r} is not supported")
        if spec.get("padding", "valid") not in ("valid", "same"):
            raise ModelFileError(f"{where}: padding {spec['padding']!r} is not supported")
        specs.append(spec)
    if input_shape is None:
        raise ModelFileError(f"{path}: no input shape (InputLayer or batch_input_shape)")
    return fmt, input_shape, specs


# ---------------------------------------------------------------------------------------------------
# torch modules with Keras (NHWC) semantics
# ---------------------------------------------------------------------------------------------------

def tf_same_pads(size, k, s):
    """TensorFlow 'same': output ceil(size/s); total padding split with the extra element after."""
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


def out_size(size, k, s, padding):
    return -(-size // s) if padding == "same" else (size - k) // s + 1


class ToLogical(nn.Module):
    """Internal NCHW -> Keras NHWC, then reshape (Reshape target) or flatten (target None)."""

    def __init__(self, in_rank4, target):
        super().__init__()
        self.in_rank4, self.target = in_rank4, target

    def forward(self, x):
        if self.in_rank4:
            x = x.permute(0, 2, 3, 1)
        if self.target is None:
            return x.reshape(x.shape[0], -1)
        x = x.reshape((x.shape[0],) + self.target)
        if len(self.target) == 3:  # (H, W, C) -> internal NCHW
            x = x.permute(0, 3, 1, 2)
        return x.contiguous()

    def extra_repr(self):
        return f"from_nchw={self.in_rank4}, target={self.target or 'flatten'}"


class Conv2dTF(nn.Module):
    def __init__(self, cin, spec, h, w):
        super().__init__()
        (kh, kw), (sh, sw) = spec["kernel"], spec["strides"]
        self.conv = nn.Conv2d(cin, spec["filters"], (kh, kw), stride=(sh, sw), bias=spec["use_bias"])
        self.pad = None
        if spec["padding"] == "same":
            t, b = tf_same_pads(h, kh, sh)
            l, r = tf_same_pads(w, kw, sw)
            if t == b and l == r:
                self.conv.padding = (t, l)
            else:
                self.pad = (l, r, t, b)

    def forward(self, x):
        if self.pad is not None:
            x = F.pad(x, self.pad)
        return self.conv(x)


class Pool2dTF(nn.Module):
    def __init__(self, spec, h, w):
        super().__init__()
        self.max = spec["type"] == "MaxPooling2D"
        self.k, self.s = spec["pool"], spec["strides"]
        self.pad = None
        if spec["padding"] == "same":
            t, b = tf_same_pads(h, self.k[0], self.s[0])
            l, r = tf_same_pads(w, self.k[1], self.s[1])
            if t or b or l or r:
                self.pad = (l, r, t, b)

    def forward(self, x):
        if self.max:
            if self.pad is not None:
                x = F.pad(x, self.pad, value=float("-inf"))
            return F.max_pool2d(x, self.k, self.s)
        if self.pad is None:
            return F.avg_pool2d(x, self.k, self.s)
        # TensorFlow averages over the real elements of each window only.
        total = F.avg_pool2d(F.pad(x, self.pad), self.k, self.s)
        count = F.avg_pool2d(F.pad(torch.ones_like(x[:1, :1]), self.pad), self.k, self.s)
        return total / count

    def extra_repr(self):
        return f"{'max' if self.max else 'average'}, pool={self.k}, strides={self.s}, pad={self.pad}"


def activation_module(name, rank4):
    if name == "relu":
        return nn.ReLU()
    if name == "tanh":
        return nn.Tanh()
    if name == "sigmoid":
        return nn.Sigmoid()
    if name == "softmax":  # Keras: over the last (channel) axis; internal NCHW keeps channels at dim 1
        return nn.Softmax(dim=1 if rank4 else -1)
    return None


def keras_glorot_uniform_(weight, keras_shape, fan_in, fan_out, gen):
    """Draw in Keras' kernel shape, then lay it out as torch wants."""
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    w = (torch.rand(keras_shape, generator=gen) * 2.0 - 1.0) * limit
    if len(keras_shape) == 2:  # Dense (in, out) -> torch (out, in)
        w = w.t()
    else:  # Conv2D (kh, kw, cin, cout) -> torch (cout, cin, kh, kw)
        w = w.permute(3, 2, 0, 1)
    with torch.no_grad():
        weight.copy_(w.contiguous())


def build_network(input_shape, specs, gen):
    """Returns (nn.Sequential, [(param, l2)], keras-style summary rows, total params)."""
    mods, l2_params, rows = [], [], []
    shape = tuple(input_shape)  # Keras (logical) shape without batch
    rank4 = False  # whether the running tensor is internally NCHW
    last_softmax_dropped = False
    n = len(specs)
    for i, sp in enumerate(specs):
        t = sp["type"]
        params = 0
        is_last = i == n - 1
        if t == "Dense":
            if len(shape) != 1:
                raise ModelFileError(f"Dense '{sp['name']}' on a rank-{len(shape) + 1} tensor is not supported")
            fin, fout = shape[0], sp["units"]
            lin = nn.Linear(fin, fout, bias=sp["use_bias"])
            keras_glorot_uniform_(lin.weight, (fin, fout), fin, fout, gen)
            if lin.bias is not None:
                nn.init.zeros_(lin.bias)
            mods.append(lin)
            l2_params.append((lin.weight, sp["l2"]))
            params = fin * fout + (fout if sp["use_bias"] else 0)
            shape = (fout,)
        elif t == "Conv2D":
            if len(shape) != 3:
                raise ModelFileError(f"Conv2D '{sp['name']}' needs a rank-4 input (N, H, W, C)")
            h, w, cin = shape
            (kh, kw), (sh, sw) = sp["kernel"], sp["strides"]
            m = Conv2dTF(cin, sp, h, w)
            keras_glorot_uniform_(m.conv.weight, (kh, kw, cin, sp["filters"]), kh * kw * cin, kh * kw * sp["filters"], gen)
            if m.conv.bias is not None:
                nn.init.zeros_(m.conv.bias)
            mods.append(m)
            l2_params.append((m.conv.weight, sp["l2"]))
            params = kh * kw * cin * sp["filters"] + (sp["filters"] if sp["use_bias"] else 0)
            shape = (out_size(h, kh, sh, sp["padding"]), out_size(w, kw, sw, sp["padding"]), sp["filters"])
        elif t in ("MaxPooling2D", "AveragePooling2D"):
            if len(shape) != 3:
                raise ModelFileError(f"{t} '{sp['name']}' needs a rank-4 input (N, H, W, C)")
            h, w, c = shape
            mods.append(Pool2dTF(sp, h, w))
            shape = (out_size(h, sp["pool"][0], sp["strides"][0], sp["padding"]),
                     out_size(w, sp["pool"][1], sp["strides"][1], sp["padding"]), c)
        elif t == "Flatten":
            mods.append(ToLogical(rank4, None))
            shape = (int(np.prod(shape)),)
        elif t == "Reshape":
            target = list(sp["target_shape"])
            total = int(np.prod(shape))
            if target.count(-1) == 1:
                known = int(np.prod([d for d in target if d != -1]))
                target[target.index(-1)] = total // known
            if int(np.prod(target)) != total:
                raise ModelFileError(f"Reshape '{sp['name']}': {shape} cannot become {tuple(sp['target_shape'])}")
            mods.append(ToLogical(rank4, tuple(target)))
            shape = tuple(target)
        elif t == "Dropout":
            mods.append(nn.Dropout(sp["rate"]))
        elif t == "BatchNormalization":
            if sp["axis"] not in (-1, len(shape)):
                raise ModelFileError(f"BatchNormalization '{sp['name']}': axis {sp['axis']} is not the last")
            # Keras' momentum m keeps m of the old statistic; torch's momentum is the new one's share.
            # torch's running variance is unbiased (n/(n-1)), Keras 3's biased: a difference of
            # 1/(batch·positions), far below what the accuracy can show.
            bn = nn.BatchNorm2d if len(shape) == 3 else nn.BatchNorm1d
            if len(shape) not in (1, 3):
                raise ModelFileError(f"BatchNormalization '{sp['name']}' on shape {shape} is not supported")
            mods.append(bn(shape[-1], eps=sp["epsilon"], momentum=1.0 - sp["momentum"]))
            params = 4 * shape[-1]
        elif t == "Activation":
            pass
        rank4 = len(shape) == 3
        act = sp.get("activation") if t in ("Dense", "Conv2D", "Activation") else None
        if act == "softmax" and is_last:
            last_softmax_dropped = True  # the loss's softmax: train on logits
        elif act:
            m = activation_module(act, rank4)
            if m is not None:
                mods.append(m)
        rows.append((sp["name"], t, (None,) + shape, params))
    if rank4:
        raise ModelFileError("the network must end in a rank-2 (N, classes) output")
    return nn.Sequential(*mods), l2_params, rows, sum(r[3] for r in rows), last_softmax_dropped, shape


# ---------------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------------

def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        magic = struct.unpack(">I", f.read(4))[0]
        if magic >> 8 != 0x08:
            raise ValueError(f"{path}: not an unsigned-byte IDX file (magic {magic:#x})")
        ndim = magic & 0xFF
        dims = struct.unpack(">" + "I" * ndim, f.read(4 * ndim))
        return np.frombuffer(f.read(), dtype=np.uint8).reshape(dims)


def find_idx(data_dir, stem):
    for name in (stem, stem + ".gz"):
        p = os.path.join(data_dir, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(f"{data_dir}: neither {stem} nor {stem}.gz")


def load_data(data_dir, validation_size):
    def images(stem):
        return read_idx(find_idx(data_dir, stem)).reshape(-1, 784).astype(np.float32) / 255.0

    def labels(stem):
        return read_idx(find_idx(data_dir, stem)).astype(np.int64)

    x, y = images("train-images-idx3-ubyte"), labels("train-labels-idx1-ubyte")
    xt, yt = images("t10k-images-idx3-ubyte"), labels("t10k-labels-idx1-ubyte")
    if not 0 <= validation_size < len(x):
        raise SystemExit(f"--validation_size {validation_size}: must be in [0, {len(x)})")
    # TensorFlow's read_data_sets: validation = the first validation_size, train = the rest.
    x, y = x[validation_size:], y[validation_size:]
    return [torch.from_numpy(np.ascontiguousarray(a)) for a in (x, y, xt, yt)]


# ---------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------

def set_threads(n):
    torch.set_num_threads(n)
    info = {"torch_threads": torch.get_num_threads()}
    try:
        import ctypes
        lib = ctypes.CDLL("libblas.so.3")
        lib.openblas_set_num_threads(n)
        info["openblas_threads"] = lib.openblas_get_num_threads()
    except (OSError, AttributeError):
        pass
    return info


def make_optimizer(args, model, l2_params):
    l2_of = {id(p): l2 for p, l2 in l2_params}
    groups = {}
    for p in model.parameters():
        # Keras' L2: loss += l2 * sum(W^2), gradient 2*l2*W == torch's (coupled) weight_decay of 2*l2.
        groups.setdefault(2.0 * l2_of.get(id(p), 0.0), []).append(p)
    param_groups = [{"params": ps, "weight_decay": wd} for wd, ps in groups.items()]
    if args.optimizer == "adam":
        # TensorFlow 1.x AdamOptimizer defaults: beta1 0.9, beta2 0.999, epsilon 1e-8. TF updates
        # w -= lr*sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps) ("epsilon hat" on the un-corrected v),
        # torch w -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps), i.e. TF's epsilon is torch's
        # eps*sqrt(1-b2^t). With eps = 1e-8 against sqrt(v) of ~1e-4..1e-2 the difference is negligible.
        return torch.optim.Adam(param_groups, lr=args.lr, betas=(args.beta1, args.beta2), eps=args.epsilon)
    return torch.optim.SGD(param_groups, lr=args.lr, momentum=args.momentum)


def accuracy(model, xt, yt, chunk):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(xt), chunk):
            correct += (model(xt[i:i + chunk]).argmax(1) == yt[i:i + chunk]).sum().item()
    model.train()
    return correct / len(xt)


def describe(path, fmt, input_shape, rows, total, dropped, model):
    print(f"{path}: {fmt}, input {(None,) + tuple(input_shape)}")
    print(f"{'layer':<22}{'type':<18}{'output shape':<22}{'params':>10}")
    for name, t, shape, params in rows:
        print(f"{name:<22}{t:<18}{str(shape):<22}{params:>10,}")
    print(f"total params: {total:,}  (final softmax {'folded into the loss' if dropped else 'absent'})")
    print(model)


def main(args):
    t_start = time.perf_counter()
    info = set_threads(args.threads)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    fmt, input_shape, specs = load_keras_json(args.model)
    model, l2_params, rows, total, dropped, out_shape = build_network(input_shape, specs, gen)
    if args.describe:
        describe(args.model, fmt, input_shape, rows, total, dropped, model)
        return
    if tuple(input_shape) != (784,):
        raise SystemExit(f"{args.model}: input shape {input_shape}; the MNIST feed is 784 floats per example")
    if out_shape != (10,):
        raise SystemExit(f"{args.model}: output shape {out_shape}; MNIST has 10 classes")
    if not dropped:
        print("note: the last layer has no softmax; training on its outputs as logits", flush=True)
    t0 = time.perf_counter()
    x, y, xt, yt = load_data(args.data, args.validation_size)
    load_s = time.perf_counter() - t0
    opt = make_optimizer(args, model, l2_params)
    n, b = x.shape[0], args.batch
    steps = n // b
    shuffle = torch.Generator().manual_seed(args.seed + 1000)
    train_s, eval_s, accs, epoch_s, losses = 0.0, 0.0, [], [], []
    print(f"{args.model} ({fmt}): {total:,} params; {n} train / {len(xt)} test examples; "
          f"{args.optimizer} lr {args.lr} batch {b}, {steps} steps/epoch; threads {info}", flush=True)
    for epoch in range(args.epochs):
        perm = torch.randperm(n, generator=shuffle)
        tc = time.perf_counter()
        loss_sum = 0.0
        for i in range(steps):
            idx = perm[i * b:(i + 1) * b]
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_sum += loss.item()
        dt = time.perf_counter() - tc
        train_s += dt
        epoch_s.append(round(dt, 3))
        te = time.perf_counter()
        acc = accuracy(model, xt, yt, args.eval_batch)
        eval_s += time.perf_counter() - te
        accs.append(acc)
        losses.append(round(loss_sum / steps, 5))
        print(f"epoch {epoch + 1:3d}  epoch_s {dt:7.2f}  train_s {train_s:8.2f}  "
              f"mean_loss {loss_sum / steps:.4f}  test_acc {acc:.4f}", flush=True)
    res = {"model_file": args.model, "format": fmt, "params": total, "data": args.data,
           "train_examples": n, "test_examples": len(xt), "validation_size": args.validation_size,
           "optimizer": args.optimizer, "lr": args.lr, "momentum": args.momentum if args.optimizer == "sgd" else None,
           "adam": {"beta1": args.beta1, "beta2": args.beta2, "epsilon": args.epsilon} if args.optimizer == "adam" else None,
           "global_batch": b, "steps_per_epoch": steps, "epochs": args.epochs, "seed": args.seed,
           "threads": args.threads, **info, "test_acc": accs, "final_test_acc": accs[-1] if accs else None,
           "mean_train_loss": losses, "epoch_train_s": epoch_s, "train_s": round(train_s, 3),
           "eval_s": round(eval_s, 3), "load_s": round(load_s, 3),
           "wall_s": round(time.perf_counter() - t_start, 3), "torch": torch.__version__, "tag": args.tag}
    line = json.dumps(res)
    print("RESULT " + line, flush=True)
    if args.json_out:
        with open(args.json_out, "a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    try:
        main(_ARGS)
    except ModelFileError as e:
        raise SystemExit(f"error: {e}")
