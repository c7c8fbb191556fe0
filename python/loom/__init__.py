"""loom from Python (docs/python.md): its trainer on NumPy arrays (``loom.train``), trained
runs (``loom.load``), its performance model (``loom.scale``, ``loom.advise``), its gradient
codecs on NumPy arrays, its compressed allreduce, and a PyTorch DistributedDataParallel
communication hook built on them.

    run = loom.train({"model": "mlp", "epochs": 2}, train=(X, y), test=(Xt, yt))
    run.summary["test_acc"], run.parameters, run.model.predict(Xt)
    loom.advise(model="resnet50", budget=100_000)["ranked"][0]

    import numpy as np, loom
    codec = loom.codecs.get("int8", block=512)
    state = codec.make_state(g.size)            # error feedback, one per bucket
    payload = codec.encode(g, state)            # uint8, codec.encoded_bytes(g.size) bytes
    approx = codec.decode(payload, n=g.size)    # float32

loom's errors become Python exceptions: bad input or parameters raise ValueError, NaN or Inf
entering a codec raises loom.NumericError (a ValueError), a lost peer loom.LostPeerError.
"""

from . import _loom
from ._loom import LostPeerError, NumericError
from . import codecs
from .training import Run, train
from .perf import advise, scale

__version__: str = _loom.__version__
#: The build's optional parts and type: {"build_type", "gemm", "cuda", "mpi", "onnx"}.
features: dict = dict(_loom.features)
#: The git revision loom was built from.
git_rev: str = _loom.git_rev

__all__ = ["codecs", "LostPeerError", "NumericError", "__version__", "features", "git_rev",
           "train", "Run", "scale", "advise"]


def load(path) -> "_loom.TrainedModel":
    """A trained run's model (a run directory, its model.safetensors, or a checkpoint
    directory), as ``loom eval`` loads it, on the CPU:

        m = loom.load("runs/mlp")
        logits = m.predict(X)            # float32 (N, m.outputs); X float32 (N, *m.input_shape)
        m.evaluate(X, y)                 # {"count", "loss", "accuracy", "confusion"}

    X is what the model takes (normalised as training normalised it; ``m.input_normalisation``
    gives (mean, stddev) of IDX pixels scaled to [0, 1] where the run recorded them). A
    missing path raises OSError (FileNotFoundError), a malformed run ValueError."""
    import os
    return _loom.TrainedModel(os.fspath(path))


__all__.append("load")
