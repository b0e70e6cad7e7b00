"""A "dtrain" backend for torch.distributed: collectives over dtrain's ring (shared memory between
the ranks of one host, authenticated TCP between hosts) for CPU tensors.

    import torch.distributed as dist
    import dtrain.torch  # registers the backend
    dist.init_process_group("dtrain")  # under torchrun, or with init_method=, rank=, world_size=

It does broadcast, all_reduce (float32; SUM, AVG), all_gather, all_gather_into_tensor and
barrier, which is what DistributedDataParallel on CPU needs; anything else raises a RuntimeError
naming it. docs/python.md says more.
"""
try:
    import torch.distributed as _torch_distributed
except ImportError as error:
    raise ImportError("dtrain.torch needs PyTorch with torch.distributed: install python3-torch "
                      "(Debian) or torch") from error

try:
    from dtrain import _dtrain_torch
except ImportError as error:
    raise ImportError("dtrain.torch: this build of dtrain has no torch backend (_dtrain_torch): "
                      "install libtorch-dev (torch's C++ headers) and build again") from error

BACKEND = "dtrain"


def _create(store, rank, world_size, timeout):
    return _dtrain_torch.create_process_group(store, rank, world_size, timeout)


if not hasattr(_torch_distributed.Backend, BACKEND.upper()):
    _torch_distributed.Backend.register_backend(BACKEND, _create)
