"""`import dtrain` chooses OpenBLAS's kernels before OpenBLAS loads (python/dtrain/_kernels.py),
and fit's configuration line says which kernels run and why: checked in fresh interpreters, each
with its own environment, against the kernel set OpenBLAS itself reports (openblas_get_corename
through ctypes, not dtrain).

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
    """The configuration line's kernels, up to the end of their reason."""
    for line in stdout.splitlines():
        at = line.find("kernels OpenBLAS")
        if at >= 0:
            text = line[at:]
            return text[:text.index(")") + 1] if " (" in text else text.split(";")[0]
    raise AssertionError(f"no kernels line in: {stdout}")


class Kernels(unittest.TestCase):
    def setUp(self):
        self.best = _kernels.best_core(_kernels.cpu_flags())
        if self.best is None:
            self.skipTest("a CPU without AVX: OpenBLAS's own pick stands")
        self.own = run(OWN_PICK, clean_environment()).stdout.strip()

    def test_chosen_before_openblas_loads(self):
        done = run(FIT.format(first=""), clean_environment())
        core, isa = self.best
        self.assertEqual(kernels_line(done.stdout), f"kernels OpenBLAS {core} (chosen for {isa})")
        self.assertIn(f"SETTING {core}", done.stderr)

    def test_openblas_loaded_first_keeps_its_pick_and_says_so(self):
        # numpy loads the same OpenBLAS, so its pick is made before dtrain can choose.
        done = run(FIT.format(first="import numpy"), clean_environment())
        line = kernels_line(done.stdout)
        self.assertTrue(line.startswith(f"kernels OpenBLAS {self.own} (OpenBLAS's pick"), line)
        self.assertNotIn("chosen", line)

    def test_the_users_setting_is_obeyed(self):
        done = run(FIT.format(first=""), clean_environment(OPENBLAS_CORETYPE="Sandybridge"))
        self.assertEqual(kernels_line(done.stdout),
                         "kernels OpenBLAS Sandybridge (OPENBLAS_CORETYPE=Sandybridge)")
        self.assertIn("SETTING Sandybridge", done.stderr)

    def test_best_core_follows_the_flags(self):
        avx512 = {"avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"}
        self.assertEqual(_kernels.best_core(avx512), ("SkylakeX", "avx512f"))
        self.assertEqual(_kernels.best_core(avx512 - {"avx512dq"}), ("Haswell", "avx2"))
        self.assertEqual(_kernels.best_core({"avx", "avx2", "fma"}), ("Haswell", "avx2"))
        self.assertEqual(_kernels.best_core({"avx", "avx2"}), ("Sandybridge", "avx"))
        self.assertIsNone(_kernels.best_core({"sse3"}))


if __name__ == "__main__":
    unittest.main()
