"""What Keras users expect of dtrain.Model, each checked against an independent computation:
numpy's own softmax regression (the weighted loss and its SGD step, the order of the batches),
the weights as Keras lays them out, `dtrain eval` and the csv module on what the callbacks wrote,
and a run whose schedule gives the rates a callback set.

Run by ctest with PYTHONPATH at the build's python/ and DTRAIN_BINARY set (tests/CMakeLists.txt).
"""
import csv
import io
import os
import subprocess
import tempfile
import unittest
import warnings

import numpy as np

import dtrain
from dtrain.callbacks import (Callback, CSVLogger, EarlyStopping, LambdaCallback, ModelCheckpoint,
                              ReduceLROnPlateau)

BINARY = os.environ.get("DTRAIN_BINARY", "dtrain")

# Softmax regression on 6 features, 3 classes: one Dense layer, whose SGD step numpy computes.
REGRESSION = {"class_name": "Sequential", "config": {"name": "regression", "layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [None, 6], "name": "in"}},
    {"class_name": "Dense", "config": {"name": "out", "units": 3, "activation": "softmax"}}]}}

TINY = {"class_name": "Sequential", "config": {"name": "tiny", "layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [None, 6], "name": "in"}},
    {"class_name": "Dense", "config": {"name": "hidden", "units": 8, "activation": "relu"}},
    {"class_name": "Dense", "config": {"name": "out", "units": 3, "activation": "softmax"}}]}}

SGD = dict(optimizer="sgd", learning_rate=0.5, threads=1, verbose=0)


def data(rows, seed):
    rng = np.random.default_rng(seed)
    x = (rng.integers(0, 32, size=(rows, 6)) / 16).astype(np.float32)
    return x, np.argmax(x[:, :3], axis=1)


def softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def numpy_sgd_step(kernel, bias, x, y, lr, weights=None):
    """One SGD step of softmax regression in float64, Keras's layout (kernel (in, out)), on the
    loss Keras reduces: the sum of each example's weighted loss over the batch size. Returns the
    new kernel, bias and the loss before the step."""
    x = x.astype(np.float64)
    w = np.ones(len(x)) if weights is None else np.asarray(weights, np.float64)
    p = softmax(x @ kernel + bias)
    loss = float(np.sum(w * -np.log(p[np.arange(len(x)), y])) / len(x))
    onehot = np.eye(kernel.shape[1])[y]
    g = (p - onehot) * w[:, None] / len(x)
    return kernel - lr * x.T @ g, bias - lr * g.sum(axis=0), loss


def run(*args):
    result = subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=240)
    if result.returncode != 0:
        raise AssertionError(f"dtrain {' '.join(args)} exited {result.returncode}:\n"
                             f"{result.stdout}\n{result.stderr}")
    return result.stdout


class WeightsAsKerasHasThem(unittest.TestCase):
    def test_get_weights_are_keras_layouts_and_predict_is_their_forward_pass(self):
        m = dtrain.Model(TINY)
        x, y = data(50, 1)
        m.fit(x, y, epochs=1, batch_size=10, **SGD)
        kernel1, bias1, kernel2, bias2 = m.get_weights()
        self.assertEqual(kernel1.shape, (6, 8))  # Keras's Dense kernel: (inputs, units)
        self.assertEqual(kernel2.shape, (8, 3))
        self.assertEqual(bias2.shape, (3,))
        # Keras's Dense computes x @ kernel + bias: numpy does it with those arrays.
        hidden = np.maximum(x @ kernel1 + bias1, 0)
        np.testing.assert_allclose(m.predict(x), softmax(hidden @ kernel2 + bias2), rtol=1e-5,
                                   atol=1e-6)

    def test_set_weights_round_trips_and_names_a_mismatch(self):
        m = dtrain.Model(TINY)
        x, y = data(50, 1)
        weights = [np.full_like(w, 0.01 * (i + 1)) for i, w in enumerate(m.get_weights())]
        m.set_weights(weights)
        for got, want in zip(m.get_weights(), weights):
            np.testing.assert_array_equal(got, want)
        before = m.predict(x)
        with self.assertRaisesRegex(dtrain.UsageError, r"has 4 weights \(hidden/kernel \(6, 8\)"):
            m.set_weights(weights[:3])
        with self.assertRaisesRegex(dtrain.UsageError,
                                    r"array 0 \(hidden/kernel\) has shape \(8, 6\).*transposed"):
            m.set_weights([weights[0].T] + weights[1:])
        with self.assertRaisesRegex(dtrain.UsageError, "NaN"):
            m.set_weights([np.full_like(weights[0], np.nan)] + weights[1:])
        np.testing.assert_array_equal(m.predict(x), before)  # a refused call changed nothing

    def test_summary_prints_keras_table_and_totals(self):
        lines = []
        dtrain.Model(TINY).summary(print_fn=lines.append)
        text = "\n".join(lines)
        self.assertEqual(lines[0], 'Model: "tiny"')
        self.assertRegex(text, r"│ hidden \(Dense\) +│ \(None, 8\) +│ +56 │")
        self.assertRegex(text, r"│ out \(Dense\) +│ \(None, 3\) +│ +27 │")
        self.assertIn(" Total params: 83 (332.00 B)", lines)
        self.assertIn(" Trainable params: 83 (332.00 B)", lines)
        self.assertIn(" Non-trainable params: 0 (0.00 B)", lines)
        self.assertEqual(len({len(line) for line in lines[1:-3]}), 1)  # the table's lines align


class WeightedAndOrdered(unittest.TestCase):
    def test_sample_weight_weighs_the_loss_and_the_step_as_numpys_softmax_regression(self):
        x, y = data(40, 2)
        w = np.random.default_rng(3).uniform(0, 2, 40).astype(np.float32)
        for strategy, extra in [("local", {}), ("allreduce", dict(workers=2))]:
            m = dtrain.Model(REGRESSION)
            kernel, bias = (a.astype(np.float64) for a in m.get_weights())
            # One step on the whole set: under all-reduce, two halves averaged.
            batch = 40 // extra.get("workers", 1)
            h = m.fit(x, y, sample_weight=w, train_steps=1, batch_size=batch, shuffle=False,
                      strategy=strategy, **extra, **SGD)
            want_kernel, want_bias, want_loss = numpy_sgd_step(kernel, bias, x, y, 0.5, w)
            got_kernel, got_bias = m.get_weights()
            np.testing.assert_allclose(got_kernel, want_kernel, rtol=1e-5, atol=1e-6,
                                       err_msg=strategy)
            np.testing.assert_allclose(got_bias, want_bias, rtol=1e-5, atol=1e-6)
            if strategy == "local":
                self.assertAlmostEqual(h["loss"][0], want_loss, places=5)
            # The control: unweighted, the step is another.
            plain_kernel, _, _ = numpy_sgd_step(kernel, bias, x, y, 0.5)
            self.assertGreater(np.abs(plain_kernel - want_kernel).max(), 1e-3)

    def test_class_weight_is_the_sample_weight_of_each_label(self):
        x, y = data(40, 2)
        a, b = dtrain.Model(REGRESSION), dtrain.Model(REGRESSION)
        a.fit(x, y, class_weight={0: 2.0, 2: 0.5}, epochs=2, batch_size=10, **SGD)
        b.fit(x, y, sample_weight=np.array([2.0, 1.0, 0.5])[y], epochs=2, batch_size=10, **SGD)
        for wa, wb in zip(a.get_weights(), b.get_weights()):
            np.testing.assert_array_equal(wa, wb)
        # And one step of it is numpy's step on those weights (class 1 unlisted: weight 1).
        c = dtrain.Model(REGRESSION)
        kernel, bias = (v.astype(np.float64) for v in c.get_weights())
        c.fit(x, y, class_weight={0: 2.0, 2: 0.5}, train_steps=1, batch_size=40, shuffle=False,
              **SGD)
        want, _, _ = numpy_sgd_step(kernel, bias, x, y, 0.5, np.array([2.0, 1.0, 0.5])[y])
        np.testing.assert_allclose(c.get_weights()[0], want, rtol=1e-5, atol=1e-6)
        with self.assertRaisesRegex(ValueError, "cannot `class_weight` and `sample_weight`"):
            a.fit(x, y, class_weight={0: 1}, sample_weight=np.ones(40), **SGD)
        with self.assertRaisesRegex(ValueError, "sample_weight: example 3 weighs -1"):
            a.fit(x, y, sample_weight=np.where(np.arange(40) == 3, -1, 1), **SGD)

    def test_shuffle_false_takes_the_batches_in_order(self):
        x, y = data(40, 4)
        m = dtrain.Model(REGRESSION)
        kernel, bias = (v.astype(np.float64) for v in m.get_weights())
        m.fit(x, y, train_steps=2, batch_size=20, shuffle=False, **SGD)
        kernel, bias, _ = numpy_sgd_step(kernel, bias, x[:20], y[:20], 0.5)
        kernel, bias, _ = numpy_sgd_step(kernel, bias, x[20:], y[20:], 0.5)
        np.testing.assert_allclose(m.get_weights()[0], kernel, rtol=1e-5, atol=1e-6)
        # Shuffled, the same two steps go another way (the control).
        shuffled = dtrain.Model(REGRESSION)
        shuffled.fit(x, y, train_steps=2, batch_size=20, seed=1, **SGD)
        self.assertGreater(np.abs(shuffled.get_weights()[0] - kernel).max(), 1e-4)

    def test_validation_split_holds_out_the_last_fraction_before_shuffling(self):
        x, y = data(40, 5)
        m = dtrain.Model(REGRESSION)
        kernel, bias = (v.astype(np.float64) for v in m.get_weights())
        h = m.fit(x, y, validation_split=0.25, train_steps=1, batch_size=30, shuffle=False, **SGD)
        want, _, _ = numpy_sgd_step(kernel, bias, x[:30], y[:30], 0.5)
        np.testing.assert_allclose(m.get_weights()[0], want, rtol=1e-5, atol=1e-6)
        self.assertAlmostEqual(m.evaluate(x[30:], y[30:])["loss"], h["val_loss"][-1], places=6)
        with self.assertRaisesRegex(ValueError, "not sufficient to split"):
            m.fit(x[:1], y[:1], validation_split=0.1, **SGD)

    def test_one_hot_labels_train_as_their_classes_and_say_so_once(self):
        x, y = data(40, 6)
        a, b = dtrain.Model(REGRESSION), dtrain.Model(REGRESSION)
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            a.fit(x, np.eye(3)[y], epochs=1, batch_size=10, **SGD)
        self.assertEqual(len([w for w in said if "one-hot" in str(w.message)]), 1)
        b.fit(x, y, epochs=1, batch_size=10, **SGD)
        np.testing.assert_array_equal(a.get_weights()[0], b.get_weights()[0])
        soft = np.eye(3)[y] * 0.8 + 0.2 / 3
        with self.assertRaisesRegex(ValueError, "row 0 is .*soft targets are not supported"):
            a.fit(x, soft, **SGD)


class TrainOnBatch(unittest.TestCase):
    def test_steps_go_on_from_each_other_as_numpys(self):
        x, y = data(20, 7)
        m = dtrain.Model(REGRESSION)
        m.fit(x, y, train_steps=1, batch_size=20, shuffle=False, **SGD)  # the settings
        kernel, bias = (v.astype(np.float64) for v in m.get_weights())
        first = m.train_on_batch(x[:10], y[:10])
        kernel, bias, want_first = numpy_sgd_step(kernel, bias, x[:10], y[:10], 0.5)
        second = m.train_on_batch(x[10:], y[10:], return_dict=True)
        kernel, bias, want_second = numpy_sgd_step(kernel, bias, x[10:], y[10:], 0.5)
        self.assertAlmostEqual(first, want_first, places=5)
        self.assertAlmostEqual(second["loss"], want_second, places=5)
        np.testing.assert_allclose(m.get_weights()[0], kernel, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(m.get_weights()[1], bias, rtol=1e-5, atol=1e-6)


def epoch_snapshots(model):
    """A callback keeping the model's weights at each epoch's end, as a callback reads them."""
    kept = []
    return kept, LambdaCallback(on_epoch_end=lambda epoch, logs: kept.append(model.get_weights()))


class Callbacks(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.x, cls.y = data(200, 8)
        # Validation labels unrelated to the features: the validation loss climbs as the model
        # learns the training set, so patience runs out.
        cls.xv, _ = data(60, 9)
        cls.yv = np.random.default_rng(10).integers(0, 3, 60)

    def test_early_stopping_stops_and_restores_the_best_epochs_weights(self):
        m = dtrain.Model(TINY)
        kept, snapshots = epoch_snapshots(m)
        stop = EarlyStopping(monitor="val_loss", patience=2, restore_best_weights=True)
        h = m.fit(self.x, self.y, validation_data=(self.xv, self.yv), epochs=40, batch_size=10,
                  callbacks=[snapshots, stop], **SGD)
        epochs = len(h["loss"])
        self.assertLess(epochs, 40)
        self.assertEqual(len(h["val_loss"]), epochs)
        self.assertEqual(h.epoch, list(range(epochs)))
        self.assertEqual(stop.stopped_epoch, epochs - 1)
        best = int(np.argmin(h["val_loss"]))
        self.assertEqual(epochs - 1 - best, 2)  # patience epochs after the best
        for got, want in zip(m.get_weights(), kept[best]):
            np.testing.assert_array_equal(got, want)
        self.assertGreater(np.abs(kept[-1][0] - kept[best][0]).max(), 0)  # the control

    def test_early_stopping_patience_flag_counts_epochs_with_validation_data(self):
        m = dtrain.Model(TINY)
        h = m.fit(self.x, self.y, validation_data=(self.xv, self.yv), epochs=40, batch_size=10,
                  early_stopping_patience=2, **SGD)
        self.assertLess(len(h["loss"]), 40)

    def test_reduce_lr_on_plateau_runs_the_rates_a_schedule_would(self):
        # Every epoch a plateau (min_delta beyond any change): the rate halves at each epoch's
        # end. The same rates from the flags' piecewise schedule must give the same bits, under
        # all-reduce and sync too, where every worker must take the new rate at the same step.
        x, y = self.x[:160], self.y[:160]
        for strategy, extra in [("local", {}), ("allreduce", dict(workers=2)),
                                ("sync", dict(workers=2, ps=1))]:
            steps = 160 // (10 * extra.get("workers", 1))
            m = dtrain.Model(TINY)
            # The first epoch sets the best; each one after it is a plateau of patience 1.
            reduce = ReduceLROnPlateau(monitor="loss", factor=0.5, patience=1, min_delta=10)
            h = m.fit(x, y, epochs=4, batch_size=10, seed=2, strategy=strategy,
                      callbacks=[reduce], lr_decay_rate=1, **extra, **SGD)
            self.assertEqual(h["learning_rate"], [0.5, 0.5, 0.25, 0.125])
            scheduled = dtrain.Model(TINY)
            scheduled.fit(x, y, epochs=4, batch_size=10, seed=2, strategy=strategy,
                          # values[0] up to and including the first boundary's step
                          lr_schedule="piecewise", lr_boundaries=[2 * steps - 1, 3 * steps - 1],
                          lr_values=[0.5, 0.25, 0.125], **extra,
                          **dict(SGD, learning_rate=None))
            for got, want in zip(m.get_weights(), scheduled.get_weights()):
                np.testing.assert_array_equal(got, want, err_msg=strategy)
            unreduced = dtrain.Model(TINY)
            unreduced.fit(x, y, epochs=4, batch_size=10, seed=2, strategy=strategy,
                          lr_decay_rate=1, **extra, **SGD)
            self.assertFalse(np.array_equal(unreduced.get_weights()[0], m.get_weights()[0]))

    def test_model_checkpoint_saves_what_dtrain_eval_reads(self):
        with tempfile.TemporaryDirectory() as folder:
            m = dtrain.Model(TINY)
            kept, snapshots = epoch_snapshots(m)
            path = os.path.join(folder, "e{epoch:02d}")
            m.fit(self.x, self.y, epochs=2, batch_size=10,
                  callbacks=[snapshots, ModelCheckpoint(path, monitor="loss")], **SGD)
            self.assertEqual(sorted(os.listdir(folder)), ["e01", "e02"])
            first = dtrain.load(os.path.join(folder, "e01"))
            for got, want in zip(first.get_weights(), kept[0]):
                np.testing.assert_array_equal(got, want)
            np.savetxt(os.path.join(folder, "test.csv"),
                       np.column_stack([self.x, self.y]), delimiter=",",
                       header="f0,f1,f2,f3,f4,f5,label", comments="", fmt="%.9g")
            out = run("eval", "--checkpoint", os.path.join(folder, "e01"), "--test_data",
                      os.path.join(folder, "test.csv"))
            self.assertIn(f"test accuracy = {first.evaluate(self.x, self.y)['accuracy']:.4f}",
                          out)

    def test_csv_logger_writes_each_epochs_logs(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "log.csv")
            h = dtrain.Model(TINY).fit(self.x, self.y, validation_data=(self.xv, self.yv),
                                       epochs=3, batch_size=10, callbacks=[CSVLogger(path)],
                                       **SGD)
            with open(path) as f:
                rows = list(csv.DictReader(f))
        self.assertEqual([int(r["epoch"]) for r in rows], [0, 1, 2])
        self.assertEqual(list(rows[0]), ["epoch", "loss", "val_accuracy", "val_loss"])
        for key in ("loss", "val_loss", "val_accuracy"):
            np.testing.assert_allclose([float(r[key]) for r in rows], h[key], rtol=1e-12)

    def test_batch_hooks_see_every_batch_with_the_running_loss(self):
        seen = []
        hook = LambdaCallback(on_train_batch_end=lambda batch, logs: seen.append((batch,
                                                                                  logs["loss"])))
        h = dtrain.Model(TINY).fit(self.x, self.y, epochs=2, batch_size=20, callbacks=[hook],
                                   **SGD)
        self.assertEqual([b for b, _ in seen], list(range(10)) * 2)
        # The last batch's running mean is the epoch's loss.
        self.assertAlmostEqual(seen[9][1], h["loss"][0], places=12)
        self.assertAlmostEqual(seen[19][1], h["loss"][1], places=12)

    def test_any_object_with_kerass_methods_is_a_callback(self):
        class Plain:  # not a dtrain Callback: Keras's method names are enough
            def __init__(self):
                self.epochs, self.batches = [], 0

            def on_epoch_end(self, epoch, logs=None):
                self.epochs.append((epoch, sorted(logs)))

            def on_batch_end(self, batch, logs=None):
                self.batches += 1

        plain = Plain()
        dtrain.Model(TINY).fit(self.x, self.y, epochs=2, batch_size=50, callbacks=[plain], **SGD)
        self.assertEqual(plain.epochs, [(0, ["loss"]), (1, ["loss"])])
        self.assertEqual(plain.batches, 8)

    def test_stop_training_in_a_batch_ends_the_run_there_and_that_epoch(self):
        class StopAtBatch3(Callback):
            def on_train_batch_end(self, batch, logs=None):
                if batch == 3:
                    self.model.stop_training = True

        m = dtrain.Model(TINY)
        before = m.get_weights()[0]
        h = m.fit(self.x, self.y, epochs=5, batch_size=10, callbacks=[StopAtBatch3()], **SGD)
        self.assertEqual(len(h["loss"]), 1)  # the epoch it stopped in ended, as Keras ends it
        # Four steps, as numpy cannot say here; a fresh run of four steps can.
        four = dtrain.Model(TINY)
        four.fit(self.x, self.y, train_steps=4, batch_size=10, **SGD)
        np.testing.assert_array_equal(m.get_weights()[0], four.get_weights()[0])
        self.assertFalse(np.array_equal(before, m.get_weights()[0]))

    def test_a_callback_that_raises_stops_fit_and_fit_raises_it(self):
        class Boom(Callback):
            def on_epoch_end(self, epoch, logs=None):
                if epoch == 1:
                    raise ValueError("boom at epoch 1")

        m = dtrain.Model(TINY)
        untrained = m.evaluate(self.x, self.y)["loss"]
        with self.assertRaisesRegex(ValueError, "boom at epoch 1"):
            m.fit(self.x, self.y, epochs=10, batch_size=10, callbacks=[Boom()], **SGD)
        # The run stopped cleanly, and the model kept what it trained: usable at once.
        self.assertLess(m.evaluate(self.x, self.y)["loss"], untrained)
        m.fit(self.x, self.y, epochs=1, batch_size=10, **SGD)

    def test_what_a_callback_may_not_do_is_refused_by_name(self):
        errors = []

        def attempt(epoch, logs):
            for call in (lambda: m.fit(self.x, self.y, **SGD),
                         lambda: m.set_weights(m.get_weights()),
                         lambda: m.train_on_batch(self.x, self.y)):
                try:
                    call()
                    errors.append("no error")
                except dtrain.UsageError as e:
                    errors.append(str(e))

        m = dtrain.Model(TINY)
        m.fit(self.x, self.y, epochs=1, batch_size=50,
              callbacks=[LambdaCallback(on_epoch_end=attempt)], **SGD)
        self.assertEqual(len(errors), 3)
        for error, call in zip(errors, ("fit", "set_weights", "train_on_batch")):
            self.assertIn(f"{call}(): this model's fit() is running (this is one of its "
                          "callbacks)", error)
        with self.assertRaisesRegex(dtrain.UsageError, "set from a callback during fit"):
            m.optimizer.learning_rate = 0.1


if __name__ == "__main__":
    unittest.main()
