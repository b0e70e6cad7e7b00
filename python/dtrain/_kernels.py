"""OpenBLAS's kernel set, chosen from the CPU's ISA flags before the extension loads OpenBLAS.

OpenBLAS picks from a table of CPU models, and a CPU newer than the table gets its SSE3 kernels;
OpenBLAS reads OPENBLAS_CORETYPE once, as it loads. The same rule as dtrain's own
(src/tensor/blas_kernels.cc): the user's OPENBLAS_CORETYPE is obeyed, else the best set for the
flags. A program that loaded OpenBLAS already (numpy is built on it) keeps OpenBLAS's pick, and
the configuration line says so.
"""
import os

# What blas_kernels_line reads: "CORE ISA PICKED", PICKED "-" as OpenBLAS has not picked yet.
CHOICE_VARIABLE = "DTRAIN_BLAS_CHOICE"


def best_core(flags):
    """The newest OpenBLAS kernel set the ISA flags run, with the flag it is for; or None."""
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return ("SkylakeX", "avx512f")
    if {"avx2", "fma"} <= flags:
        return ("Haswell", "avx2")
    if "avx" in flags:
        return ("Sandybridge", "avx")
    return None


def cpu_flags(path="/proc/cpuinfo"):
    """The first processor's flags (the kernel lists only what the OS enables)."""
    try:
        with open(path, encoding="ascii", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def choose_before_loading(environ=os.environ):
    """Sets OPENBLAS_CORETYPE to the best set for this CPU when neither the user nor dtrain did."""
    if "OPENBLAS_CORETYPE" in environ or CHOICE_VARIABLE in environ:
        return
    best = best_core(cpu_flags())
    if best is None:
        return
    environ["OPENBLAS_CORETYPE"] = best[0]
    environ[CHOICE_VARIABLE] = f"{best[0]} {best[1]} -"
