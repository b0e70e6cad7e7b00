"""dtrain from Python: train, evaluate, predict and export models on numpy arrays.

    import dtrain
    m = dtrain.Model("mnist_inference")            # a built-in model, a Keras JSON file or dict
    h = m.fit(x, y, epochs=2, strategy="allreduce", workers=2, validation_data=(xv, yv))
    m.evaluate(xt, yt)                             # {"accuracy": ..., "loss": ...}

Every keyword of fit is a flag of `dtrain train` under its own name, with the same default (the
model's recipe, then dtrain's) and the same checks. docs/python.md has the whole API.
"""
import json
import os
import shutil
import sys
import tempfile
import weakref

import numpy as np

from dtrain import _dtrain
from dtrain._dtrain import (CheckpointError, CollectiveError, DataError, Error, IoError,
                            TransportError, UsageError)

__all__ = ["Model", "load", "models", "Error", "UsageError", "DataError", "CheckpointError",
           "IoError", "TransportError", "CollectiveError"]


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
        x = np.ascontiguousarray(x, dtype=np.float32)
    return x.reshape(x.shape[0], -1), pixels


def _labels(y, name):
    """y as int32 class labels, (n,)."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.dtype.kind not in "iu" and not (y.dtype.kind == "f" and np.all(np.mod(y, 1) == 0)):
        raise TypeError(f"{name}: labels must be integer classes, got dtype {y.dtype}")
    if y.ndim != 1:
        raise ValueError(f"{name}: labels must be one class per example, got shape {y.shape}")
    if y.size and (y.min() < np.iinfo(np.int32).min or y.max() > np.iinfo(np.int32).max):
        raise ValueError(f"{name}: labels out of range")
    return np.ascontiguousarray(y, dtype=np.int32)


class _Progress:
    """Collects the history from the run's records and prints one line per epoch (verbose=1),
    as Keras does, or the engine's own lines too (verbose=2)."""

    def __init__(self, verbose, epochs):
        self.verbose = verbose
        self.epochs = epochs
        self.history = {"loss": []}
        self.validation = None  # the last evaluation's (step, accuracy, loss)

    def on_record(self, step, scalars, final):
        if "validation/accuracy" in scalars:
            self.validation = (step, scalars["validation/accuracy"], scalars["validation/loss"])
        if "epoch_loss" not in scalars:
            return
        self.history["loss"].append(scalars["epoch_loss"])
        line = f"Epoch {int(scalars['epochs'])}"
        if self.epochs:
            line += f"/{self.epochs}"
        line += f" - loss: {scalars['epoch_loss']:.4f}"
        if self.validation is not None and self.validation[0] == step:
            self.history.setdefault("val_accuracy", []).append(self.validation[1])
            self.history.setdefault("val_loss", []).append(self.validation[2])
            line += (f" - val_accuracy: {self.validation[1]:.4f}"
                     f" - val_loss: {self.validation[2]:.4f}")
        line += f" - {scalars['epoch_examples_per_sec']:.0f} examples/sec"
        if self.verbose >= 1:
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
        if isinstance(model, _dtrain.Engine):
            self._engine = model
            self._model = self._file_for(model.model_name, model.model_json)
        elif isinstance(model, dict):
            self._model = self._write_json(model)
            self._engine = _dtrain.Engine(self._model)
        elif isinstance(model, (str, os.PathLike)):
            self._model = os.fspath(model)
            self._engine = _dtrain.Engine(self._model)
        else:
            raise TypeError(f"Model(): give a model name, a Keras JSON file or a dict, "
                            f"not {type(model).__name__}")

    def _write_json(self, spec):
        if self._folder is None:
            self._folder = tempfile.mkdtemp(prefix="dtrain-model-")
            weakref.finalize(self, shutil.rmtree, self._folder, True)
        name = str(spec.get("config", {}).get("name", "model")) if isinstance(spec, dict) else "model"
        path = os.path.join(self._folder, "".join(c if c.isalnum() or c in "_-" else "_"
                                                  for c in name) + ".json")
        with open(path, "w") as f:
            json.dump(spec, f)
        return path

    def _file_for(self, name, spec_json):
        """What fit names the model by: its name where that still finds it, else its JSON."""
        if name in models() or os.path.isfile(name):
            return name
        return self._write_json(json.loads(spec_json))

    @property
    def name(self):
        return self._engine.model_name

    def fit(self, x, y, epochs=None, batch_size=None, optimizer=None, learning_rate=None,
            seed=None, strategy=None, workers=None, ps=None, validation_data=None, logdir=None,
            verbose=1, **flags):
        """Trains on x (n, features) or (n, h, w[, c]) and integer labels y; returns the history,
        a dict of per-epoch lists: "loss" always, "val_accuracy" and "val_loss" with
        validation_data=(x_val, y_val), evaluated at the end of each epoch.

        Each keyword is the `dtrain train` flag of its name (None: the flag's default); any other
        flag is accepted as a keyword too. strategy "local" (default), "towers", "allreduce",
        "async" or "sync" (with ps=P): the workers are threads of this process, over in-memory
        links (allreduce) or loopback connections (the ps strategies). A model trained or loaded
        before goes on from its weights. Ctrl-C stops at the next step boundary, keeps the weights
        of that step, and raises KeyboardInterrupt."""
        keywords = dict(epochs=epochs, batch_size=batch_size, optimizer=optimizer,
                        learning_rate=learning_rate, seed=seed, strategy=strategy,
                        workers=workers, ps=ps, logdir=logdir, **flags)
        if "model" in flags:
            raise TypeError("fit(): the model is the Model's; build another Model for another")
        arguments = ["--model", self._model] + list(_dtrain.flag_arguments(keywords))
        features, pixels = _features(x, "x")
        labels = _labels(y, "y")
        val_x = val_y = None
        if validation_data is not None:
            if not isinstance(validation_data, (tuple, list)) or len(validation_data) != 2:
                raise TypeError("validation_data: give (x_val, y_val)")
            val_x, val_pixels = _features(validation_data[0], "validation_data")
            val_y = _labels(validation_data[1], "validation_data")
            if val_pixels != pixels:
                raise TypeError("validation_data: its features must have x's dtype "
                                "(uint8 pixels both, or numbers both)")
        progress = _Progress(verbose, epochs if epochs is not None and epochs == int(epochs)
                             else None)
        self._engine.fit(arguments, features, labels, val_x, val_y, pixels, progress.on_record,
                         progress.on_text)
        return progress.history

    def evaluate(self, x, y):
        """{"accuracy": float, "loss": float} of the model on x and y."""
        features, _ = _features(x, "x")
        accuracy, loss = self._engine.evaluate(features, _labels(y, "y"))
        return {"accuracy": accuracy, "loss": loss}

    def predict(self, x):
        """The logits, float32 (n, classes) (one column for a binary head)."""
        features, _ = _features(x, "x")
        return self._engine.predict(features)

    def save(self, path):
        """Writes a checkpoint into the folder path (created if need be), as `dtrain train
        --train_dir` does: `dtrain eval/export/predict --checkpoint path` and dtrain.load read
        it. Returns the checkpoint file's path."""
        return self._engine.save(os.fspath(path))

    def export_onnx(self, path):
        """Writes the model with its weights as an ONNX file (what `dtrain export` writes)."""
        return self._engine.export_onnx(os.fspath(path))


def load(path):
    """The model of a checkpoint: a checkpoint file, or a folder (its newest valid checkpoint) that
    Model.save or `dtrain train --train_dir` wrote."""
    return Model(_dtrain.Engine.load(os.fspath(path)))
