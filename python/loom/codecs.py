"""loom's gradient codecs (docs/compress.md) on contiguous float32 NumPy arrays.

``get(name, **params)`` returns a :class:`Codec`. Input is taken zero-copy and must be a
C-contiguous, aligned float32 array: float64 or strided input is refused with a ValueError
naming the problem (loom never converts a gradient behind the caller's back, so the bits a
codec sees are the caller's). The GIL is released while a codec runs.

Parameters (keyword arguments of ``get``; the ``codec.*`` keys of a loom config): every
codec takes ``error_feedback`` (codec.error_feedback: keep what was not sent, default True) and
the casts take ``residual`` (codec.residual: "fp32" or "bf16"); a codec's own keys, listed in
its record (``kinds()``), are named without ``codec.`` and the codec's name:
``codec.int8_block`` is ``block``, ``codec.topk_fraction`` is ``fraction``,
``codec.powersgd_rank`` is ``rank``, ``codec.seed`` is ``seed``.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from . import _loom

State = _loom.State

def _keywords() -> tuple[dict[str, str], dict[str, str]]:
    """The keyword -> codec.* key map, and the codec that owns each codec-specific keyword,
    from the codecs' records: adding a codec to loom adds its keywords here."""
    keys = {"error_feedback": "error_feedback", "residual": "residual"}
    own = {}
    for kind in _loom.codec_kinds():
        for spec in kind["keys"]:
            key = spec["key"].removeprefix("codec.")
            word = key.removeprefix(kind["name"] + "_")
            keys[word] = key
            own[word] = kind["name"]
    return keys, own


_KEYS, _OWN = _keywords()


def kinds() -> list[dict]:
    """Every codec's record: name, summary, reference, lossy, summable, aggregation
    ("stripes", "linear" or "gather"), wire_bits_per_element (at the defaults), auto_candidate,
    device_kernels and its codec.* keys."""
    return list(_loom.codec_kinds())


def names() -> list[str]:
    """The codec names loom knows, in the registry's order (fp32, fp16, bf16, int8, onebit,
    topk, powersgd, and any registered since)."""
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
