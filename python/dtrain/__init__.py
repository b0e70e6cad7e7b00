"""dtrain from Python: train, evaluate, predict and export models on numpy arrays, as Keras does.

    import dtrain
    from dtrain.callbacks import EarlyStopping
    m = dtrain.Model("mnist_inference")            # a built-in model, a Keras JSON file or dict
    h = m.fit(x, y, epochs=20, strategy="allreduce", workers=2, validation_split=0.1,
              callbacks=[EarlyStopping(patience=2, restore_best_weights=True)])
    m.evaluate(xt, yt)                             # {"accuracy": ..., "loss": ...}
    m.predict(xt[:5])                              # probabilities, as Keras's predict

Every other keyword of fit is a flag of `dtrain train` under its own name, with the same default
(the model's recipe, then dtrain's) and the same checks. docs/python.md has the whole API.
"""
import contextlib
import json
import numbers
import os
import re
import shutil
import sys
import tempfile
import warnings
import weakref

# Before numpy and the extension load OpenBLAS, which reads its kernel setting only then.
from dtrain import _kernels

_kernels.choose_before_loading()

import numpy as np  # noqa: E402  (after the kernel choice, on purpose)

from dtrain import _dtrain
from dtrain import callbacks as callbacks_module
from dtrain._dtrain import (CheckpointError, CollectiveError, DataError, Error, IoError,
                            TransportError, UsageError)

__all__ = ["Model", "load", "models", "callbacks", "Error", "UsageError", "DataError",
           "CheckpointError", "IoError", "TransportError", "CollectiveError"]

callbacks = callbacks_module


def models():
    """The names of the built-in models (`dtrain models` describes them)."""
    return list(_dtrain.models())


def _features(x, name):
    """x as dtrain reads it: float32, C-contiguous, (n, features); and whether it held pixels.

    float32 is used as it is (no copy where it is already C-contiguous); uint8 is scaled by 1/255
    as the command line scales images; other real numbers (float16/64, integers) are converted to
    float32 as they are; anything else is refused."""
    x = np.asarray(x)
    if x.dtype == np.bool_ or x.dtype.kind not in "fiu":
        raise TypeError(f"{name}: features must be real numbers (float32, uint8 pixels, ...), "
                        f"got dtype {x.dtype}")
    if x.ndim < 2:
        raise ValueError(f"{name}: features must be (n, features) or (n, h, w[, c]), "
                         f"got shape {x.shape}")
    pixels = x.dtype == np.uint8
    if pixels:
        x = x.astype(np.float32) / np.float32(255)
    else:
        # A float64 beyond float32's range becomes an infinity, which the engine refuses naming
        # its row and column: numpy's own warning would only repeat it less precisely.
        with np.errstate(over="ignore"):
            x = np.ascontiguousarray(x, dtype=np.float32)
    return x.reshape(x.shape[0], -1), pixels


def _from_one_hot(y, name):
    """The classes of one-hot rows, as Keras's categorical targets hold them; said once."""
    if not (np.all((y == 0) | (y == 1)) and np.all(y.sum(axis=1) == 1)):
        row = int(np.argmax(~(((y == 0) | (y == 1)).all(axis=1) & (y.sum(axis=1) == 1))))
        raise ValueError(f"{name}: labels of shape {y.shape} are one-hot rows or nothing, and "
                         f"row {row} is {y[row].tolist()}: dtrain trains on classes (soft "
                         "targets are not supported); give one class per example")
    warnings.warn(f"{name}: one-hot labels of shape {y.shape}: each row's class is its argmax "
                  "(dtrain trains on class labels; give them as (n,) to skip this)", stacklevel=4)
    return np.argmax(y, axis=1)


def _labels(y, name):
    """y as int32 class labels, (n,): integers, integral floats, or one-hot rows."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim == 2 and y.shape[1] > 1 and y.dtype.kind in "fiub":
        y = _from_one_hot(y, name)
    if y.dtype.kind not in "iu" and not (y.dtype.kind == "f" and np.all(np.mod(y, 1) == 0)):
        raise TypeError(f"{name}: labels must be integer classes, got dtype {y.dtype}")
    if y.ndim != 1:
        raise ValueError(f"{name}: labels must be one class per example, got shape {y.shape}")
    if y.size and (y.min() < np.iinfo(np.int32).min or y.max() > np.iinfo(np.int32).max):
        raise ValueError(f"{name}: labels out of range")
    return np.ascontiguousarray(y, dtype=np.int32)


def _example_weights(labels, sample_weight, class_weight):
    """Each example's weight as float32 (n,), or None: Keras's sample_weight, or its class_weight
    of each label (one of them; Keras refuses both)."""
    if sample_weight is not None and class_weight is not None:
        raise ValueError("You cannot `class_weight` and `sample_weight` at the same time.")
    if class_weight is not None:
        if not hasattr(class_weight, "items"):
            raise ValueError("`class_weight` must be a dict-like mapping of class indices to "
                             f"weights. Received: class_weight={class_weight!r}")
        table = np.ones(int(labels.max(initial=0)) + 1, np.float32)
        for key, value in class_weight.items():
            try:
                k = int(key)
            except (TypeError, ValueError):
                raise ValueError("`class_weight` must be a dictionary with integer keys "
                                 f"representing class indices. Received an invalid key: {key!r} "
                                 f"of type {type(key)}.") from None
            if 0 <= k < len(table):
                table[k] = value
        return table[labels]
    if sample_weight is None:
        return None
    weights = np.asarray(sample_weight)
    if weights.ndim == 2 and weights.shape[1] == 1:
        weights = weights[:, 0]
    if weights.dtype.kind not in "fiu" or weights.dtype == np.bool_:
        raise TypeError(f"sample_weight: weights must be numbers, got dtype {weights.dtype}")
    return np.ascontiguousarray(weights, dtype=np.float32)


# How the engine names a flag at fault: "--batch_size 0: must be at least 1", and how its parser
# does for a value of the wrong type: "Could not convert: --workers = x".
_FLAG_AT_FAULT = re.compile(r"--(\w+)(?: [^:]*)?: ")
_NOT_CONVERTED = re.compile(r"Could not convert: --(\w+) = ")


def _named_as_keyword(error, keywords):
    """error, naming the keyword the caller gave rather than the command line's flag."""
    text = str(error)
    for pattern, converted in ((_FLAG_AT_FAULT, True), (_NOT_CONVERTED, False)):
        at_fault = pattern.match(text)
        if at_fault is None or keywords.get(at_fault.group(1)) is None:
            continue
        name = at_fault.group(1)
        rest = text[at_fault.end():] if converted else f"not a value of its type ({text})"
        return type(error)(f"{name}={keywords[name]!r}: {rest}")
    return error


def _whole_epochs(epochs):
    """Keras counts epochs in whole numbers (range(epochs)); part of an epoch is train_steps."""
    if epochs is None:
        return
    if isinstance(epochs, bool) or not isinstance(epochs, numbers.Real) or \
            not float(epochs).is_integer():
        raise UsageError(f"epochs={epochs!r}: must be a whole number of epochs, as Keras's fit "
                         "takes (for part of an epoch, give train_steps=)")


def _split_off(validation_split, arrays):
    """Keras's validation_split: the last fraction of each array (before any shuffling) held out,
    as (training part, validation part) of each."""
    if not isinstance(validation_split, numbers.Real) or not 0 <= validation_split < 1:
        raise ValueError(f"validation_split={validation_split!r}: must be a fraction in [0, 1)")
    n = arrays[0].shape[0]
    split_at = int(np.floor(n * (1.0 - validation_split)))
    if split_at == 0 or split_at == n:
        raise ValueError(f"Training data contains {n} samples, which is not sufficient to split "
                         "it into a validation and training set as specified by "
                         f"`validation_split={validation_split}`. Either provide more data, or a "
                         "different value for the `validation_split` argument.")
    return [(a[:split_at], a[split_at:]) if a is not None else (None, None) for a in arrays]


class _Optimizer:
    """model.optimizer during fit, as Keras callbacks use it: learning_rate is the rate of the
    next step; setting it changes the rate from that step on (in place of the schedule)."""

    def __init__(self):
        self._rate = None  # as of the chief's last boundary
        self._ordered = None
        self._in_fit = False

    @property
    def learning_rate(self):
        return self._rate

    @learning_rate.setter
    def learning_rate(self, value):
        if not self._in_fit:
            raise UsageError(f"optimizer.learning_rate = {value!r}: a rate is set from a "
                             "callback during fit(); before it, give fit(learning_rate=...)")
        value = float(value)
        if not np.isfinite(value) or value <= 0:
            raise UsageError(f"optimizer.learning_rate = {value!r}: must be positive")
        self._ordered = self._rate = value

    lr = learning_rate  # Keras 2's name


class _Progress(callbacks_module.Callback):
    """The lines fit prints: one per epoch (verbose=1), as Keras does, and the engine's own too
    (verbose=2)."""

    def __init__(self, verbose, epochs):
        super().__init__()
        self.verbose = verbose
        self.epochs = epochs
        self.examples_per_sec = 0.0

    def on_epoch_end(self, epoch, logs=None):
        if self.verbose < 1:
            return
        line = f"Epoch {epoch + 1}" + (f"/{self.epochs}" if self.epochs else "")
        for key in ("loss", "val_accuracy", "val_loss"):
            if key in (logs or {}):
                line += f" - {key}: {logs[key]:.4f}"
        line += f" - {self.examples_per_sec:.0f} examples/sec"
        print(line, flush=True)

    def on_text(self, text):
        if self.verbose >= 2:
            sys.stdout.write(text)
            sys.stdout.flush()


class Model:
    """A model: its architecture, its weights, and the settings they were trained with."""

    def __init__(self, model):
        """model: a built-in model's name (dtrain.models()), a Keras JSON file, or the Keras JSON
        as a dict."""
        self._folder = None  # where a dict's JSON is written, for as long as the model lives
        self._written = None  # that file, and what messages call it instead
        self.stop_training = False
        self.optimizer = _Optimizer()
        self.history = None
        if isinstance(model, _dtrain.Engine):
            self._engine = model
            self._model = self._file_for(model.model_name, model.model_json)
        elif isinstance(model, dict):
            self._model = self._write_json(model, "the model dict given to dtrain.Model()")
            with self._naming_the_source():
                self._engine = _dtrain.Engine(self._model)
        elif isinstance(model, (str, os.PathLike)):
            self._model = os.fspath(model)
            self._engine = _dtrain.Engine(self._model)
        else:
            raise TypeError(f"Model(): give a model name, a Keras JSON file or a dict, "
                            f"not {type(model).__name__}")

    def _write_json(self, spec, called):
        """A file of spec's JSON, for the engine's --model; its messages call it `called`."""
        if self._folder is None:
            self._folder = tempfile.mkdtemp(prefix="dtrain-model-")
            weakref.finalize(self, shutil.rmtree, self._folder, True)
        name = str(spec.get("config", {}).get("name", "model")) if isinstance(spec, dict) else "model"
        path = os.path.join(self._folder, "".join(c if c.isalnum() or c in "_-" else "_"
                                                  for c in name) + ".json")
        with open(path, "w") as f:
            json.dump(spec, f)
        self._written = (path, called)
        return path

    @contextlib.contextmanager
    def _naming_the_source(self):
        """dtrain errors raised inside that name the model as the caller gave it: the dict, not
        the temporary file the engine reads it from."""
        try:
            yield
        except Error as error:
            if self._written is None or self._written[0] not in str(error):
                raise
            raise type(error)(str(error).replace(*self._written)) from None

    def _file_for(self, name, spec_json):
        """What fit names the model by: its name where that still finds it, else its JSON."""
        if name in models() or os.path.isfile(name):
            return name
        return self._write_json(json.loads(spec_json),
                                f"the Keras JSON of model {name!r}, from its checkpoint")

    @property
    def name(self):
        return self._engine.model_name

    def fit(self, x, y, epochs=None, batch_size=None, optimizer=None, learning_rate=None,
            seed=None, strategy=None, workers=None, ps=None, validation_data=None, logdir=None,
            verbose=1, callbacks=None, validation_split=0.0, shuffle=True, class_weight=None,
            sample_weight=None, **flags):
        """Trains on x (n, features) or (n, h, w[, c]) and labels y (integer classes, or one-hot
        rows); returns the History (h["loss"], h.history["val_loss"], ...): per-epoch lists of
        "loss", and "val_loss" and "val_accuracy" with validation data.

        As Keras's fit: validation_data=(x_val, y_val), or validation_split (the last fraction
        of x and y, before shuffling), evaluated at each epoch's end; callbacks (dtrain.callbacks
        or any object with Keras's methods); class_weight ({class: weight}) or sample_weight
        (n,) weigh each example's loss; shuffle=False keeps x's order every epoch.

        Every other keyword is the `dtrain train` flag of its name (None: the flag's default);
        any other flag is accepted as a keyword too. strategy "local" (default), "towers",
        "allreduce", "async" or "sync" (with ps=P): the workers are threads of this process, over
        in-memory links (allreduce) or loopback connections (the ps strategies). A model trained
        or loaded before goes on from its weights. Ctrl-C stops at the next step boundary, keeps
        the weights of that step, and raises KeyboardInterrupt; so does a callback's exception
        (raised in turn)."""
        keywords = dict(epochs=epochs, batch_size=batch_size, optimizer=optimizer,
                        learning_rate=learning_rate, seed=seed, strategy=strategy,
                        workers=workers, ps=ps, logdir=logdir, **flags)
        if "model" in flags:
            raise TypeError("fit(): the model is the Model's; build another Model for another")
        if not isinstance(shuffle, bool):
            raise TypeError(f"shuffle={shuffle!r}: True (each epoch in a new order) or False")
        _whole_epochs(epochs)
        arguments = ["--model", self._model] + list(_dtrain.flag_arguments(keywords))
        features, pixels = _features(x, "x")
        labels = _labels(y, "y")
        weights = _example_weights(labels, sample_weight, class_weight)
        val_x = val_y = None
        if validation_data is not None:
            if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3):
                raise TypeError("validation_data: give (x_val, y_val)")
            if len(validation_data) == 3:
                raise ValueError("validation_data: dtrain evaluates validation data unweighted; "
                                 "give (x_val, y_val) without sample weights")
            val_x, val_pixels = _features(validation_data[0], "validation_data")
            val_y = _labels(validation_data[1], "validation_data")
            if val_pixels != pixels:
                raise TypeError("validation_data: its features must have x's dtype "
                                "(uint8 pixels both, or numbers both)")
        elif validation_split:
            if features.shape[0] != labels.shape[0]:
                raise ValueError(f"x: {features.shape[0]} examples but {labels.shape[0]} labels")
            (features, val_x), (labels, val_y), (weights, _) = _split_off(
                validation_split, [features, labels, weights])
        progress = _Progress(verbose, epochs if epochs is not None else None)
        history = callbacks_module.History()
        listed = list(callbacks or [])
        run_callbacks = callbacks_module._CallbackList(
            listed + [history, progress], self,
            {"verbose": verbose, "epochs": epochs, "steps": None})
        last_logs = {}

        def on_event(kind, epoch, batch, step, rate, examples_per_sec, logs):
            self.optimizer._rate = rate
            self.optimizer._ordered = None
            if kind == "train_begin":
                run_callbacks.call("on_train_begin", None)
            elif kind == "epoch_begin":
                run_callbacks.call("on_epoch_begin", epoch, None)
            elif kind == "batch_begin":
                run_callbacks.call("on_train_batch_begin", batch, None)
            elif kind == "batch_end":
                run_callbacks.call("on_train_batch_end", batch, logs)
            elif kind == "epoch_end":
                progress.examples_per_sec = examples_per_sec
                run_callbacks.call("on_epoch_end", epoch, logs)
                last_logs.clear()
                last_logs.update(logs)
            return bool(self.stop_training), self.optimizer._ordered

        # A fit called from a callback of another is refused by the engine: it leaves the
        # running fit's state alone.
        nested = self.optimizer._in_fit
        if not nested:
            self.stop_training = False
            self.optimizer._in_fit = True
        try:
            with self._naming_the_source():
                self._engine.fit(arguments, features, labels, weights, val_x, val_y, pixels,
                                 shuffle, on_event, progress.on_text,
                                 run_callbacks.wants_batches())
        except UsageError as error:
            raise _named_as_keyword(error, keywords) from None
        finally:
            if not nested:
                self.optimizer._in_fit = False
        run_callbacks.call("on_train_end", dict(last_logs))
        self.history = history
        return history

    def evaluate(self, x, y, precision="fp32"):
        """{"accuracy": float, "loss": float} of the model on x and y. precision="bf16" runs the
        evaluation's products on bf16 inputs with fp32 sums, as `dtrain eval --precision bf16`
        does (refused where the CPU has no bf16 kernels); the weights stay fp32 either way."""
        if not isinstance(precision, str):
            raise TypeError(f"precision={precision!r}: 'fp32' or 'bf16'")
        features, _ = _features(x, "x")
        labels = _labels(y, "y")
        try:
            accuracy, loss = self._engine.evaluate(features, labels, precision)
        except UsageError as error:
            raise _named_as_keyword(error, {"precision": precision}) from None
        return {"accuracy": accuracy, "loss": loss}

    def predict(self, x, logits=False):
        """What the model outputs for x, float32 (n, outputs), as Keras's predict returns it: the
        probabilities of a model that ends in softmax (n, classes) or in a sigmoid (n, 1), the
        outputs of any other head. logits=True: the values before that last activation, which
        dtrain's loss applies (the class is their argmax, or a logit >= 0 for a binary head)."""
        features, _ = _features(x, "x")
        return self._engine.predict(features, bool(logits))

    def train_on_batch(self, x, y, sample_weight=None, class_weight=None, return_dict=False):
        """One step of the model's optimizer on the batch x, y (Keras's train_on_batch), from the
        weights and optimizer state the model has, kept for the next call; the settings are the
        last fit's, else the model's recipe, at its learning rate (no schedule: there are no
        epochs to count). Returns the batch's loss before the step ({"loss": ...} with
        return_dict)."""
        features, _ = _features(x, "x")
        labels = _labels(y, "y")
        weights = _example_weights(labels, sample_weight, class_weight)
        with self._naming_the_source():
            loss = self._engine.train_on_batch(["--model", self._model], features, labels,
                                               weights)
        return {"loss": loss} if return_dict else loss

    def get_weights(self):
        """The weights as Keras's get_weights() lists them: each layer's in order (a Dense
        layer's kernel (inputs, units) and bias, a Conv2D's kernel (kh, kw, in, out) and bias, a
        BatchNormalization's gamma, beta, moving mean and moving variance), float32 copies."""
        return list(self._engine.get_weights())

    def set_weights(self, weights):
        """Replaces the weights with arrays in get_weights()'s order, count and shapes (a list
        from Keras's get_weights() of the same model fits); each mismatch is named."""
        self._engine.set_weights(list(weights))

    def summary(self, line_length=None, print_fn=None):
        """Prints Keras's summary table: each layer with its output shape and parameters, then
        the totals (trainable, non-trainable, and the optimizer's once it has trained)."""
        name, rows, optimizer_params = self._engine.summary_rows()
        width = line_length or 88
        # Keras's columns: 45%, 35% and 20% of the line, each cell padded by a space each side.
        inner = width - 10
        widths = [int(0.45 * inner), int(0.80 * inner) - int(0.45 * inner)]
        widths.append(inner - sum(widths))
        cells = [(f"{layer} ({kind})", "(" + ", ".join(str(d) for d in shape) + ")",
                  f"{params:,}") for layer, kind, shape, params, _ in rows]

        def rule(left, middle, right, fill):
            return left + middle.join(fill * (w + 2) for w in widths) + right

        def line(row, bar):
            left, shape, count = row
            return (f"{bar} {left:<{widths[0]}} {bar} {shape:<{widths[1]}} {bar} "
                    f"{count:>{widths[2]}} {bar}")

        out = print_fn or print
        out(f'Model: "{name}"')
        out(rule("┏", "┳", "┓", "━"))
        out(line(("Layer (type)", "Output Shape", "Param #"), "┃"))
        out(rule("┡", "╇", "┩", "━"))
        for i, row in enumerate(cells):
            if i:
                out(rule("├", "┼", "┤", "─"))
            out(line(row, "│"))
        out(rule("└", "┴", "┘", "─"))
        trainable = sum(r[3] - r[4] for r in rows)
        frozen = sum(r[4] for r in rows)
        total = trainable + frozen + optimizer_params
        out(f" Total params: {total:,} ({_memory(total * 4)})")
        out(f" Trainable params: {trainable:,} ({_memory(trainable * 4)})")
        out(f" Non-trainable params: {frozen:,} ({_memory(frozen * 4)})")
        if optimizer_params:
            out(f" Optimizer params: {optimizer_params:,} ({_memory(optimizer_params * 4)})")

    def save(self, path):
        """Writes a checkpoint into the folder path (created if need be), as `dtrain train
        --train_dir` does: `dtrain eval/export/predict --checkpoint path` and dtrain.load read
        it. Returns the checkpoint file's path. From a callback of fit (ModelCheckpoint), it
        saves the weights of that boundary."""
        return self._engine.save(os.fspath(path))

    def export_onnx(self, path):
        """Writes the model with its weights as an ONNX file (what `dtrain export` writes)."""
        return self._engine.export_onnx(os.fspath(path))


def _memory(size):
    """Keras's readable_memory_size."""
    for unit in ["B", "KB", "MB", "GB", "TB"]:
        if size / 1024 < 1:
            return f"{size:.2f} {unit}"
        size /= 1024
    return f"{size:.2f} PB"


def load(path):
    """The model of a checkpoint: a checkpoint file, or a folder (its newest valid checkpoint) that
    Model.save or `dtrain train --train_dir` wrote."""
    return Model(_dtrain.Engine.load(os.fspath(path)))
