"""fit(precision="bf16"): the training steps' products on bf16 inputs, as `dtrain train
--precision bf16` runs them, and evaluate(precision="bf16") as `dtrain eval --precision bf16`;
refused where oneDNN has no bf16 kernels (ONEDNN_MAX_CPU_ISA holds it below them in a child
process, on any CPU), and an unknown precision refused by its keyword.

Run by ctest with PYTHONPATH at the build's python/ (tests/CMakeLists.txt).
"""
import contextlib
import io
import os
import subprocess
import sys
import unittest

import numpy as np

import dtrain

MODEL = {"class_name": "Sequential", "config": {"name": "small", "layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [None, 32], "name": "in"}},
    {"class_name": "Dense", "config": {"name": "hidden", "units": 64, "activation": "relu"}},
    {"class_name": "Dense", "config": {"name": "out", "units": 4, "activation": "softmax"}}]}}


def data():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4000, 32)).astype(np.float32)
    y = np.argmax(x[:, :4] + 0.5 * x[:, 4:8], axis=1)
    return x, y


def fitted(precision):
    x, y = data()
    model = dtrain.Model(MODEL)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        model.fit(x, y, epochs=3, batch_size=50, seed=5, threads=1, optimizer="adam",
                  learning_rate=0.01, verbose=2, precision=precision)
    return model, printed.getvalue()


class Precision(unittest.TestCase):
    def test_bf16_trains_on_other_arithmetic_to_the_same_accuracy(self):
        try:
            bf16, printed = fitted("bf16")
        except dtrain.UsageError as e:
            self.assertIn("AVX512-BF16", str(e))
            self.skipTest(f"no bf16 kernels here: {e}")
        fp32, _ = fitted("fp32")
        self.assertIn("precision    bf16 products with fp32 sums", printed)
        x, y = data()
        # Rounding every product's inputs changes the weights a run ends with ...
        self.assertFalse(all(np.array_equal(a, b)
                             for a, b in zip(bf16.get_weights(), fp32.get_weights())))
        # ... and not what they learnt.
        a, b = bf16.evaluate(x, y)["accuracy"], fp32.evaluate(x, y)["accuracy"]
        self.assertGreater(b, 0.9)
        self.assertLess(abs(a - b), 0.02, (a, b))

    def test_evaluate_in_bf16_rounds_the_products_and_keeps_the_accuracy(self):
        model, _ = fitted("fp32")
        x, y = data()
        try:
            bf16 = model.evaluate(x, y, precision="bf16")
        except dtrain.UsageError as e:
            self.assertIn("AVX512-BF16", str(e))
            self.skipTest(f"no bf16 kernels here: {e}")
        fp32 = model.evaluate(x, y)
        self.assertEqual(fp32, model.evaluate(x, y, precision="fp32"))
        # The same weights through other arithmetic: another loss, the same answers nearly.
        self.assertNotEqual(bf16["loss"], fp32["loss"])
        self.assertLess(abs(bf16["loss"] - fp32["loss"]), 0.05 * fp32["loss"], (bf16, fp32))
        self.assertLess(abs(bf16["accuracy"] - fp32["accuracy"]), 0.01, (bf16, fp32))
        # Evaluating in bf16 leaves the model's weights as they were.
        self.assertEqual(fp32, model.evaluate(x, y))

    def test_evaluate_refuses_an_unknown_precision_by_its_keyword(self):
        model, _ = fitted("fp32")
        x, y = data()
        with self.assertRaises(dtrain.UsageError) as refused:
            model.evaluate(x, y, precision="fp16")
        self.assertIn("precision='fp16'", str(refused.exception))
        self.assertIn("fp32", str(refused.exception))
        with self.assertRaises(TypeError):
            model.evaluate(x, y, precision=16)

    def test_an_unknown_precision_is_refused_by_its_flag(self):
        x, y = data()
        with self.assertRaises(dtrain.UsageError) as refused:
            dtrain.Model(MODEL).fit(x, y, epochs=1, verbose=0, precision="fp16")
        # Named as the keyword, as every flag given to fit is.
        self.assertIn("precision='fp16'", str(refused.exception))
        self.assertIn("fp32", str(refused.exception))

    def test_bf16_is_refused_naming_what_the_kernels_lack(self):
        script = ("import numpy as np, dtrain\n"
                  f"m = dtrain.Model({MODEL!r})\n"
                  "x = np.zeros((100, 32), np.float32); y = np.zeros(100, np.int64)\n"
                  "try:\n"
                  "    m.fit(x, y, epochs=1, verbose=0, precision='bf16')\n"
                  "except dtrain.UsageError as e:\n"
                  "    print('refused:', e)\n"
                  "m.fit(x, y, epochs=1, verbose=0)\n"
                  "try:\n"
                  "    m.evaluate(x, y, precision='bf16')\n"
                  "except dtrain.UsageError as e:\n"
                  "    print('evaluate refused:', e)\n")
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=120, env=dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2"))
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertIn("refused: precision='bf16': ", done.stdout)
        self.assertIn("evaluate refused: precision='bf16': ", done.stdout)
        self.assertIn("AVX512-BF16", done.stdout)


if __name__ == "__main__":
    unittest.main()
