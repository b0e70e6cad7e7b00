"""`import dtrain` chooses OpenBLAS's kernels before OpenBLAS loads (python/dtrain/_kernels.py):
checked in fresh interpreters, each with its own environment, against the kernel set OpenBLAS
itself reports in that process (openblas_get_corename through ctypes, not dtrain). fit's products
run on oneDNN, and its configuration line says so as `dtrain train`'s does.

Run by ctest with PYTHONPATH at the build's python/ (tests/CMakeLists.txt).
"""
import os
import subprocess
import sys
import unittest

from dtrain import _kernels

# Fits a tiny model with the engine's lines shown, and prints the kernels line and the setting.
FIT = """
import json, os, sys
{first}
import dtrain
import numpy as np
model = {{"class_name": "Sequential", "config": {{"name": "tiny", "layers": [
    {{"class_name": "InputLayer", "config": {{"batch_input_shape": [None, 4], "name": "in"}}}},
    {{"class_name": "Dense", "config": {{"name": "out", "units": 2, "activation": "softmax"}}}}]}}}}
x = np.random.default_rng(0).random((64, 4), dtype=np.float32)
y = (x[:, 0] > 0.5).astype(np.int64)
dtrain.Model(model).fit(x, y, epochs=1, batch_size=16, verbose=2, threads=1)
import ctypes
blas = ctypes.CDLL("libopenblas.so.0")
blas.openblas_get_corename.restype = ctypes.c_char_p
print("RUNNING", blas.openblas_get_corename().decode(), file=sys.stderr)
print("SETTING", os.environ.get("OPENBLAS_CORETYPE", "-"), file=sys.stderr)
"""

OWN_PICK = """
import ctypes
blas = ctypes.CDLL("libopenblas.so.0")
blas.openblas_get_corename.restype = ctypes.c_char_p
print(blas.openblas_get_corename().decode())
"""


def clean_environment(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", _kernels.CHOICE_VARIABLE)}
    env.update(extra)
    return env


def run(code, env):
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    if done.returncode != 0:
        raise AssertionError(f"exit {done.returncode}: {done.stdout}{done.stderr}")
    return done


def kernels_line(stdout):
    """The configuration line's kernels, up to the first layer's."""
    for line in stdout.splitlines():
        at = line.find("kernels ")
        if at >= 0:
            return line[at:].split(";")[0]
    raise AssertionError(f"no kernels line in: {stdout}")


def reported(stderr, what):
    """What the script printed after RUNNING or SETTING."""
    for line in stderr.splitlines():
        if line.startswith(what + " "):
            return line.split()[1]
    raise AssertionError(f"no {what} line in: {stderr}")


class Kernels(unittest.TestCase):
    def setUp(self):
        self.best = _kernels.best_core(_kernels.cpu_flags())
        if self.best is None:
            self.skipTest("a CPU without AVX: OpenBLAS's own pick stands")
        self.own = run(OWN_PICK, clean_environment()).stdout.strip()

    def test_chosen_before_openblas_loads(self):
        done = run(FIT.format(first=""), clean_environment())
        self.assertEqual(reported(done.stderr, "SETTING"), self.best[0])
        self.assertEqual(reported(done.stderr, "RUNNING"), self.best[0])

    def test_openblas_loaded_first_keeps_its_pick(self):
        # numpy loads the same OpenBLAS, so its pick is made before dtrain can choose.
        done = run(FIT.format(first="import numpy"), clean_environment())
        self.assertEqual(reported(done.stderr, "RUNNING"), self.own)

    def test_the_users_setting_is_obeyed(self):
        done = run(FIT.format(first=""), clean_environment(OPENBLAS_CORETYPE="Sandybridge"))
        self.assertEqual(reported(done.stderr, "SETTING"), "Sandybridge")
        self.assertEqual(reported(done.stderr, "RUNNING"), "Sandybridge")

    def test_fit_names_the_kernels_as_the_binary_does(self):
        done = run(FIT.format(first=""), clean_environment())
        binary = subprocess.run(
            [os.environ.get("DTRAIN_BINARY", "dtrain"), "bench", "train", "--threads", "1",
             "--warmup_secs", "0", "--secs", "0.05", "--reps", "1"],
            capture_output=True, text=True, timeout=120, check=True)
        self.assertTrue(kernels_line(done.stdout).startswith("kernels oneDNN sgemm ("),
                        done.stdout)
        self.assertEqual(kernels_line(done.stdout), kernels_line(binary.stdout))

    def test_best_core_follows_the_flags(self):
        avx512 = {"avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"}
        self.assertEqual(_kernels.best_core(avx512), ("SkylakeX", "avx512f"))
        self.assertEqual(_kernels.best_core(avx512 - {"avx512dq"}), ("Haswell", "avx2"))
        self.assertEqual(_kernels.best_core({"avx", "avx2", "fma"}), ("Haswell", "avx2"))
        self.assertEqual(_kernels.best_core({"avx", "avx2"}), ("Sandybridge", "avx"))
        self.assertIsNone(_kernels.best_core({"sse3"}))


if __name__ == "__main__":
    unittest.main()
