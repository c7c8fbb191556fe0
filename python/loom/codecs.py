"""loom's gradient codecs (docs/compress.md) on contiguous float32 NumPy arrays.

``get(name, **params)`` returns a :class:`Codec`. Input is taken zero-copy and must be a
C-contiguous, aligned float32 array: float64 or strided input is refused with a ValueError
naming the problem (loom never converts a gradient behind the caller's back, so the bits a
codec sees are the caller's). The GIL is released while a codec runs.

Parameters (keyword arguments of ``get``; the ``codec.*`` keys of a loom config):

==================  =================  ==========================================
keyword             config key         meaning
==================  =================  ==========================================
error_feedback      codec.error_feedback  keep what was not sent (default True)
residual            codec.residual     "fp32" or "bf16" (fp16 and bf16 codecs)
block               codec.int8_block   int8: elements per absmax block
column              codec.onebit_column onebit: elements per reconstruction pair
fraction            codec.topk_fraction topk: fraction of entries sent
rank                codec.powersgd_rank powersgd: rank of the approximation
cols                codec.powersgd_cols powersgd: columns of the bucket's matrix
seed                codec.seed         powersgd: seed of the initial Q
==================  =================  ==========================================
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from . import _loom

State = _loom.State

_KEYS = {
    "error_feedback": "error_feedback",
    "residual": "residual",
    "block": "int8_block",
    "column": "onebit_column",
    "fraction": "topk_fraction",
    "rank": "powersgd_rank",
    "cols": "powersgd_cols",
    "seed": "seed",
}
_OWN = {"block": "int8", "column": "onebit", "fraction": "topk", "rank": "powersgd",
        "cols": "powersgd", "seed": "powersgd"}


def names() -> list[str]:
    """The codec names loom knows: fp32, fp16, bf16, int8, onebit, topk, powersgd."""
    return list(_loom.codec_names())


class Codec:
    """One loom codec with its parameters. Stateless: error feedback lives in :class:`State`
    objects (``make_state``), one per bucket, reusable across calls."""

    def __init__(self, impl: _loom.Codec):
        self._impl = impl

    @property
    def name(self) -> str:
        return self._impl.name

    @property
    def aggregation(self) -> str:
        """How a sum over ranks is formed: "stripes", "gather" (topk) or "linear" (powersgd)."""
        return self._impl.aggregation

    @property
    def error_feedback(self) -> bool:
        return self._impl.error_feedback

    def encoded_bytes(self, n: int) -> int:
        """Exact size in bytes of the encoding of n elements (a multiple of 4)."""
        return self._impl.encoded_bytes(n)

    def make_state(self, n: int, bucket: str = "python") -> State:
        """A zero error-feedback state for a bucket of n elements (``bucket`` names it in
        error messages)."""
        return self._impl.make_state(n, bucket)

    def encode(self, grad: np.ndarray, state: Optional[State] = None,
               out: Optional[np.ndarray] = None) -> np.ndarray:
        """Encodes grad (float32, C-contiguous) and returns the packed bytes (uint8, or
        ``out``, a C-contiguous 4-byte aligned buffer of at least encoded_bytes(grad.size)
        bytes). With ``state`` its residual is added first and the new residual kept there
        (error feedback); without, a zero residual is used and dropped."""
        return self._impl.encode(grad, state, out)

    def decode(self, payload: np.ndarray, out: Optional[np.ndarray] = None,
               n: Optional[int] = None, accumulate: bool = False) -> np.ndarray:
        """Decodes payload (bytes from encode) into ``out`` (float32; ``accumulate`` adds to
        it) or a new float32 array of ``n`` elements. The payload must be exactly
        encoded_bytes(n) bytes and hold the codec's invariants, and decode to finite values;
        otherwise ValueError, and ``out`` is left as it was."""
        return self._impl.decode(payload, out, n, accumulate)

    def __repr__(self) -> str:
        return repr(self._impl)


def get(name: str, **params) -> Codec:
    """The codec ``name`` (see :func:`names`) with its parameters (module docstring). An
    unknown name, parameter or value raises ValueError."""
    if not isinstance(name, str):
        raise ValueError(f"codec name: {name!r} is not a string")
    config = {}
    for key, value in params.items():
        if key not in _KEYS:
            raise ValueError(f"codec {name}: unknown parameter {key!r} "
                             f"(one of: {', '.join(sorted(_KEYS))})")
        if key in _OWN and _OWN[key] != name:
            raise ValueError(f"codec {name}: parameter {key!r} belongs to codec {_OWN[key]}")
        config[_KEYS[key]] = value
    return Codec(_loom.Codec(name, config))
