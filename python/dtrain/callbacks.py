"""Keras's callbacks for dtrain.Model.fit: the same protocol, names and arguments.

    from dtrain.callbacks import EarlyStopping, ModelCheckpoint, ReduceLROnPlateau, CSVLogger
    m.fit(x, y, epochs=50, validation_split=0.1,
          callbacks=[EarlyStopping(patience=3, restore_best_weights=True),
                     ReduceLROnPlateau(factor=0.5, patience=2),
                     ModelCheckpoint("runs/best", save_best_only=True),
                     CSVLogger("training.csv")])

A callback is any object with Keras's methods (on_train_begin/end, on_epoch_begin/end,
on_train_batch_begin/end or on_batch_begin/end), called on the thread that called fit while
training waits at that boundary; self.model is the dtrain.Model, whose stop_training,
optimizer.learning_rate, get_weights() and save() it may use. docs/python.md says where dtrain
differs from Keras.
"""
import collections
import collections.abc
import csv
import os
import warnings

import numpy as np

__all__ = ["Callback", "History", "EarlyStopping", "ModelCheckpoint", "ReduceLROnPlateau",
           "CSVLogger", "LambdaCallback"]


def _default(method):
    """Marks a Callback method that does nothing: fit skips the batch hand-overs no callback
    wants (each costs a wait of the training threads per step)."""
    method._dtrain_default = True
    return method


class Callback:
    """Keras's base class: override the methods of the boundaries you want."""

    def __init__(self):
        self.params = None
        self.model = None

    def set_params(self, params):
        self.params = params

    def set_model(self, model):
        self.model = model

    @_default
    def on_train_begin(self, logs=None):
        pass

    @_default
    def on_train_end(self, logs=None):
        pass

    @_default
    def on_epoch_begin(self, epoch, logs=None):
        pass

    @_default
    def on_epoch_end(self, epoch, logs=None):
        pass

    @_default
    def on_batch_begin(self, batch, logs=None):
        pass

    @_default
    def on_batch_end(self, batch, logs=None):
        pass

    @_default
    def on_train_batch_begin(self, batch, logs=None):
        self.on_batch_begin(batch, logs=logs)

    @_default
    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs=logs)


class History(Callback, collections.abc.Mapping):
    """What fit returns: history (a dict of per-epoch lists, as Keras's History.history) and
    epoch; it is also that dict itself, so h["loss"] and h.history["loss"] both work."""

    def __init__(self):
        super().__init__()
        self.history = {}
        self.epoch = []

    def on_train_begin(self, logs=None):
        self.epoch = []

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for key, value in (logs or {}).items():
            self.history.setdefault(key, []).append(value)

    def __getitem__(self, key):
        return self.history[key]

    def __iter__(self):
        return iter(self.history)

    def __len__(self):
        return len(self.history)

    def __repr__(self):
        return f"History({self.history!r})"


class _Monitor(Callback):
    """Keras's MonitorCallback: a quantity of the epoch's logs, whether lower or higher is better
    (mode "auto": higher for accuracy, lower for anything else), and an improvement margin."""

    def __init__(self, monitor="val_loss", mode="auto", baseline=None, min_delta=0):
        super().__init__()
        if mode not in ("auto", "min", "max"):
            warnings.warn(f"{type(self).__name__} mode '{mode}' is unknown, fallback to auto "
                          "mode.", stacklevel=3)
            mode = "auto"
        self.monitor = monitor
        self.mode = mode
        self.best = baseline
        self.min_delta = abs(min_delta)
        self._higher = (mode == "max" or
                        (mode == "auto" and monitor.removeprefix("val_") in ("accuracy", "acc")))

    def _is_improvement(self, current, reference):
        if reference is None:
            return True
        if self._higher:
            return current - self.min_delta > reference
        return current + self.min_delta < reference

    def _current(self, logs, what):
        value = (logs or {}).get(self.monitor)
        if value is None:
            warnings.warn(f"{what} conditioned on metric `{self.monitor}` which is not "
                          f"available. Available metrics are: {','.join((logs or {}).keys())}",
                          stacklevel=3)
        return value


class EarlyStopping(_Monitor):
    """Stops fit when `monitor` has not improved by min_delta for `patience` epochs; with
    restore_best_weights, the model ends with the weights of its best epoch."""

    def __init__(self, monitor="val_loss", min_delta=0, patience=0, verbose=0, mode="auto",
                 baseline=None, restore_best_weights=False, start_from_epoch=0):
        super().__init__(monitor, mode, min_delta=min_delta)
        self.patience = patience
        self.verbose = verbose
        self.baseline = baseline
        self.restore_best_weights = restore_best_weights
        self.start_from_epoch = start_from_epoch
        self.wait = 0
        self.stopped_epoch = 0
        self.best_weights = None
        self.best_epoch = 0

    def on_train_begin(self, logs=None):
        self.wait = 0
        self.stopped_epoch = 0
        self.best = None
        self.best_weights = None
        self.best_epoch = 0

    def on_epoch_end(self, epoch, logs=None):
        current = self._current(logs, "Early stopping")
        if current is None or epoch < self.start_from_epoch:
            return
        if self.restore_best_weights and self.best_weights is None:
            self.best_weights = self.model.get_weights()
            self.best_epoch = epoch
        self.wait += 1
        if self._is_improvement(current, self.best):
            self.best = current
            self.best_epoch = epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            if self.baseline is None or self._is_improvement(current, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self.stopped_epoch > 0 and self.verbose > 0:
            print(f"Epoch {self.stopped_epoch + 1}: early stopping")
        if self.restore_best_weights and self.best_weights is not None:
            if self.verbose > 0:
                print("Restoring model weights from the end of the best epoch: "
                      f"{self.best_epoch + 1}.")
            self.model.set_weights(self.best_weights)


class ReduceLROnPlateau(_Monitor):
    """Multiplies the learning rate by `factor` (down to min_lr) when `monitor` has not improved
    by min_delta for `patience` epochs, then waits `cooldown` epochs."""

    def __init__(self, monitor="val_loss", factor=0.1, patience=10, verbose=0, mode="auto",
                 min_delta=1e-4, cooldown=0, min_lr=0.0, **kwargs):
        super().__init__(monitor, mode, min_delta=min_delta)
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau does not support a factor >= 1.0. Received "
                             f"factor={factor}")
        if kwargs:
            raise TypeError(f"ReduceLROnPlateau: unexpected arguments {sorted(kwargs)}")
        self.factor = factor
        self.min_lr = min_lr
        self.patience = patience
        self.verbose = verbose
        self.cooldown = cooldown
        self.cooldown_counter = 0
        self.wait = 0

    def on_train_begin(self, logs=None):
        self.best = None
        self.cooldown_counter = 0
        self.wait = 0

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        logs["learning_rate"] = float(self.model.optimizer.learning_rate)
        current = self._current(logs, "Learning rate reduction")
        if current is None:
            return
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.wait = 0
        if self._is_improvement(current, self.best):
            self.best = current
            self.wait = 0
            return
        if self.cooldown_counter > 0:
            return
        self.wait += 1
        if self.wait < self.patience:
            return
        old = float(self.model.optimizer.learning_rate)
        if old > np.float32(self.min_lr):
            new = max(old * self.factor, self.min_lr)
            self.model.optimizer.learning_rate = new
            if self.verbose > 0:
                print(f"\nEpoch {epoch + 1}: ReduceLROnPlateau reducing learning rate to {new}.")
            self.cooldown_counter = self.cooldown
            self.wait = 0


class ModelCheckpoint(_Monitor):
    """Saves the model at each epoch's end (or only when `monitor` improved, save_best_only)
    into `filepath`, which may hold Keras's {epoch} and the logs' names ("runs/e{epoch:02d}").

    A save is a dtrain checkpoint folder, as Model.save writes it (dtrain.load, `dtrain eval
    --checkpoint` read it): Keras's .keras and .weights.h5 files need Keras. save_weights_only
    saves the weights without the optimizer's slots."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False,
                 save_weights_only=False, mode="auto", save_freq="epoch",
                 initial_value_threshold=None):
        super().__init__(monitor, mode, initial_value_threshold)
        if save_freq != "epoch" and not isinstance(save_freq, int):
            raise ValueError(f"Unrecognized save_freq: {save_freq}. Expected save_freq are "
                             "'epoch' or integer values")
        self.filepath = os.fspath(filepath)
        self.verbose = verbose
        self.save_best_only = save_best_only
        self.save_weights_only = save_weights_only
        self.save_freq = save_freq
        self._batches_seen = 0
        self._current_epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._current_epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq == "epoch":
            return
        self._batches_seen += 1
        if self._batches_seen >= self.save_freq:
            self._batches_seen = 0
            self._save(self._current_epoch, batch, logs)

    @property
    def _dtrain_wants_batches(self):
        return self.save_freq != "epoch"  # only a batch-wise save_freq needs the batch events

    def on_epoch_end(self, epoch, logs=None):
        if self.save_freq == "epoch":
            self._save(epoch, None, logs)

    def _save(self, epoch, batch, logs):
        logs = logs or {}
        names = dict(logs, epoch=epoch + 1)
        if batch is not None:
            names.setdefault("batch", batch + 1)
        try:
            path = self.filepath.format(**names)
        except KeyError as e:
            raise KeyError(f'Failed to format this callback filepath: "{self.filepath}". '
                           f"Reason: {e}") from None
        if self.save_best_only:
            current = logs.get(self.monitor)
            if current is None:
                warnings.warn(f"Can save best model only with {self.monitor} available.",
                              stacklevel=2)
            elif not self._is_improvement(current, self.best):
                if self.verbose > 0:
                    print(f"\nEpoch {epoch + 1}: {self.monitor} did not improve from "
                          f"{self.best:.5f}")
                return
            else:
                if self.verbose > 0:
                    best = "None" if self.best is None else f"{self.best:.5f}"
                    print(f"\nEpoch {epoch + 1}: {self.monitor} improved from {best} to "
                          f"{current:.5f}, saving model to {path}")
                self.best = current
        elif self.verbose > 0:
            print(f"\nEpoch {epoch + 1}: saving model to {path}")
        # A dtrain checkpoint holds the model's JSON, its weights and its optimizer's slots
        # either way, as Keras 3's weights file holds the optimizer's state too.
        self.model.save(path)


class CSVLogger(Callback):
    """Writes each epoch's logs as a row of `filename` ("epoch" then the logs' names, sorted),
    flushed at once; append=True goes on from an earlier file."""

    def __init__(self, filename, separator=",", append=False):
        super().__init__()
        self.sep = separator
        self.filename = os.fspath(filename)
        self.append = append
        self.writer = None
        self.keys = None
        self.append_header = True
        self.csv_file = None

    def on_train_begin(self, logs=None):
        if self.append:
            if os.path.exists(self.filename):
                with open(self.filename) as f:
                    self.append_header = not bool(len(f.readline()))
            mode = "a"
        else:
            mode = "w"
        if self.csv_file and not self.csv_file.closed:
            self.csv_file.close()
        self.csv_file = open(self.filename, mode, newline="")
        self.writer = None
        self.keys = None

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}

        def handle_value(k):
            is_zero_dim_ndarray = isinstance(k, np.ndarray) and k.ndim == 0
            if isinstance(k, str):
                return k
            if isinstance(k, collections.abc.Iterable) and not is_zero_dim_ndarray:
                return f'"[{", ".join(map(str, k))}]"'
            return k

        if self.keys is None:
            self.keys = sorted(logs.keys())
            if self.keys and not any(key.startswith("val_") for key in self.keys):
                self.keys.extend([f"val_{k}" for k in self.keys])
        if not self.writer:
            class Dialect(csv.excel):
                delimiter = self.sep

            self.writer = csv.DictWriter(self.csv_file, fieldnames=["epoch"] + self.keys,
                                         dialect=Dialect)
            if self.append_header:
                self.writer.writeheader()
        row = collections.OrderedDict({"epoch": epoch})
        row.update((key, handle_value(logs.get(key, "NA"))) for key in self.keys)
        self.writer.writerow(row)
        self.csv_file.flush()

    def on_train_end(self, logs=None):
        if self.csv_file and not self.csv_file.closed:
            self.csv_file.close()
        self.writer = None


class LambdaCallback(Callback):
    """A callback of functions: on_epoch_begin(epoch, logs), on_epoch_end(epoch, logs),
    on_train_begin(logs), on_train_end(logs), on_train_batch_begin(batch, logs),
    on_train_batch_end(batch, logs), and any other method by its name."""

    def __init__(self, on_epoch_begin=None, on_epoch_end=None, on_train_begin=None,
                 on_train_end=None, on_train_batch_begin=None, on_train_batch_end=None,
                 **kwargs):
        super().__init__()
        self.__dict__.update(kwargs)
        for name, function in [("on_epoch_begin", on_epoch_begin),
                               ("on_epoch_end", on_epoch_end),
                               ("on_train_begin", on_train_begin),
                               ("on_train_end", on_train_end),
                               ("on_train_batch_begin", on_train_batch_begin),
                               ("on_train_batch_end", on_train_batch_end)]:
            if function is not None:
                setattr(self, name, function)


_BATCH_METHODS = ("on_train_batch_begin", "on_train_batch_end", "on_batch_begin", "on_batch_end")


def _wants(callback, name):
    if hasattr(callback, "_dtrain_wants_batches"):
        return callback._dtrain_wants_batches
    method = getattr(callback, name, None)
    return method is not None and not getattr(method, "_dtrain_default", False)


class _CallbackList:
    """The callbacks of one fit, called in order at each of the chief's boundaries, as Keras's
    CallbackList calls them; what they decide (model.stop_training, a new learning rate) goes
    back to the run."""

    def __init__(self, callbacks, model, params):
        self.callbacks = list(callbacks)
        for callback in self.callbacks:
            for method in ("set_model", "set_params"):
                if hasattr(callback, method):
                    getattr(callback, method)(model if method == "set_model" else params)
            if not hasattr(callback, "set_model"):
                try:
                    callback.model = model
                except AttributeError:
                    pass

    def wants_batches(self):
        return any(_wants(c, name) for c in self.callbacks for name in _BATCH_METHODS)

    def call(self, name, *args):
        # A Callback's on_train_batch_* calls its on_batch_*; another object may have either.
        alias = {"on_train_batch_begin": "on_batch_begin",
                 "on_train_batch_end": "on_batch_end"}.get(name)
        for callback in self.callbacks:
            method = getattr(callback, name, None)
            if method is None and alias is not None:
                method = getattr(callback, alias, None)
            if method is not None:
                method(*args)

