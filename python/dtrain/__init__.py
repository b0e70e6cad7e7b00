"""dtrain from Python: train, evaluate, predict and export models on numpy arrays.

    import dtrain
    m = dtrain.Model("mnist_inference")
    history = m.fit(x, y, epochs=2, strategy="allreduce", workers=2)

docs/python.md has the whole API.
"""
from dtrain._dtrain import (CheckpointError, CollectiveError, DataError, Error, IoError,
                            TransportError, UsageError)

__all__ = ["Error", "UsageError", "DataError", "CheckpointError", "IoError", "TransportError",
           "CollectiveError"]
