"""Collectives between processes on numpy arrays, over dtrain's authenticated transport (shared
memory between the ranks of one host, TCP between hosts).

    import numpy as np
    import dtrain.distributed as dist
    dist.init()                       # the launcher's rank: torchrun-style, mpirun or srun
    grads = np.ones(1000, np.float32)
    dist.allreduce(grads, op="mean")  # in place, on every rank
    dist.shutdown()

The ranks meet at a rendezvous and prove the cluster secret (DTRAIN_SECRET or secret_file=) as
`dtrain task` does; docs/python.md says more.
"""
from dtrain import _dtrain

__all__ = ["init", "is_initialized", "rank", "world_size", "allreduce", "broadcast", "barrier",
           "shutdown"]

# The one group of this process, as torch.distributed keeps its default group.
_group = None


def init(rank=None, world_size=None, rendezvous=None, secret_file=None, timeout=60.0):
    """Joins this process's ranks. Without arguments, the rank, the world size and where the
    ranks meet come from the launcher, exactly as for `dtrain task`; else give rank=, world_size=
    and rendezvous="HOST:PORT" (rank 0's host, and a port it listens on for the others).
    timeout: seconds to wait for the other ranks, and for a stuck rank inside a collective."""
    global _group
    if _group is not None:
        raise RuntimeError("dtrain.distributed.init(): already initialised; call shutdown() first")
    _group = _dtrain.RankGroup(rank=rank, world_size=world_size, rendezvous=rendezvous or "",
                               secret_file=secret_file or "", timeout=timeout)


def is_initialized():
    return _group is not None


def _current():
    if _group is None:
        raise RuntimeError("dtrain.distributed: call init() first")
    return _group


def rank():
    return _current().rank


def world_size():
    return _current().world_size


def allreduce(a, op="sum"):
    """Replaces the C-contiguous float32 numpy array `a`, in place and without a copy, by its sum
    (op="sum") or mean (op="mean") over the ranks; every rank ends with the same bits."""
    _current().allreduce(a, op)


def broadcast(a, root=0):
    """Copies rank `root`'s `a` into every rank's `a`, in place, bit for bit (any numeric dtype;
    the same shape on every rank)."""
    _current().broadcast(a, root)


def barrier():
    """Returns once every rank has called it."""
    _current().barrier()


def shutdown():
    """Leaves the group; init() may be called again."""
    global _group
    _group = None
