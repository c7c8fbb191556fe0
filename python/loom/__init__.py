"""loom from Python: its gradient codecs on NumPy arrays, its compressed allreduce, and a
PyTorch DistributedDataParallel communication hook built on them (docs/python.md).

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

__version__: str = _loom.__version__
#: The build's optional parts and type: {"build_type", "gemm", "cuda", "mpi", "onnx"}.
features: dict = dict(_loom.features)
#: The git revision loom was built from.
git_rev: str = _loom.git_rev

__all__ = ["codecs", "LostPeerError", "NumericError", "__version__", "features", "git_rev"]
