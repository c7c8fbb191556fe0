"""loom.codecs from Python: each codec's bytes against an independent NumPy reading of the packed
layout its header documents (src/loom/compress/*_codec.h), error feedback, and bad input."""

import numpy as np
import pytest

import loom
from loom import codecs

RNG = np.random.default_rng(7)


def grad(n, scale=1.0):
    return (RNG.standard_normal(n) * scale).astype(np.float32)


def bf16_rne(x):
    """float32 -> bfloat16 bit patterns, round to nearest even (finite input)."""
    u = x.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def test_version_and_features():
    assert loom.__version__.count(".") == 2
    assert set(loom.features) >= {"build_type", "gemm", "cuda", "cudnn", "nccl", "mpi", "onnx"}
    # The registry's records, the built-in codecs first in their order.
    assert codecs.names() == [k["name"] for k in codecs.kinds()]
    assert codecs.names()[:7] == ["fp32", "fp16", "bf16", "int8", "onebit", "topk", "powersgd"]


def test_keywords_come_from_the_records():
    """Every codec-specific key of a record is a keyword of get(), named without ``codec.`` and
    the codec's name, and belongs to that codec alone."""
    for kind in codecs.kinds():
        others = [k["name"] for k in codecs.kinds() if k["name"] != kind["name"]]
        for spec in kind["keys"]:
            word = spec["key"].removeprefix("codec.").removeprefix(kind["name"] + "_")
            assert codecs._KEYS[word] == spec["key"].removeprefix("codec.")
            assert codecs._OWN[word] == kind["name"]
            with pytest.raises(ValueError, match=f"belongs to codec {kind['name']}"):
                codecs.get(others[0], **{word: 1})
    assert codecs.get("int8", block=64).encoded_bytes(64) == codecs.get("int8").encoded_bytes(64)
    assert codecs.get("topk", fraction=0.5).encoded_bytes(100) > codecs.get("topk").encoded_bytes(100)
    lossless = [k["name"] for k in codecs.kinds() if not k["lossy"]]
    assert lossless == ["fp32"]


@pytest.mark.parametrize("n", [1, 7, 1000, 4099])
def test_fp16_is_numpy_half(n):
    g = grad(n, 3.0)
    c = codecs.get("fp16")
    payload = c.encode(g)
    assert payload.dtype == np.uint8 and payload.size == c.encoded_bytes(n) == (2 * n + 3) // 4 * 4
    assert payload[:2 * n].tobytes() == g.astype("<f2").tobytes()
    out = c.decode(payload, n=n)
    np.testing.assert_array_equal(out.view(np.uint32), g.astype(np.float16).astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("n", [1, 9, 1000, 4099])
def test_bf16_rounds_to_nearest_even(n):
    g = grad(n, 5.0)
    g[0] = np.float32(1.0) + np.float32(2.0 ** -8)  # a tie: rounds to even (1.0)
    c = codecs.get("bf16")
    payload = c.encode(g)
    bits = payload[:2 * n].view(np.uint16)
    np.testing.assert_array_equal(bits, bf16_rne(g))
    out = c.decode(payload, n=n)
    np.testing.assert_array_equal(out.view(np.uint32), bits.astype(np.uint32) << 16)


def onebit_reference(s, column):
    """Levels and sign words per onebit_codec.h: per column, the means of the negative and the
    non-negative entries, summed in 16 lanes (element i to lane i % 16) combined as
    combine8(l[j] + l[j + 8])."""
    n = s.size
    levels, words = [], np.zeros((n + 31) // 32, np.uint32)
    for c0 in range(0, n, column):
        col = s[c0:c0 + column]
        neg = col < 0
        sums = []
        for mask in (neg, ~neg):
            lanes = np.zeros(16, np.float32)
            for i in range(col.size):
                if mask[i]:
                    lanes[i % 16] = np.float32(lanes[i % 16] + col[i])
            m = (lanes[:8] + lanes[8:]).astype(np.float32)
            total = np.float32(np.float32(np.float32(m[0] + m[1]) + np.float32(m[2] + m[3])) +
                               np.float32(np.float32(m[4] + m[5]) + np.float32(m[6] + m[7])))
            cnt = int(mask.sum())
            sums.append(np.float32(total / np.float32(cnt)) if cnt else np.float32(0))
        levels += sums
        for i in range(col.size):
            if not neg[i]:
                words[(c0 + i) // 32] |= np.uint32(1 << ((c0 + i) % 32))
    return np.array(levels, np.float32), words


@pytest.mark.parametrize("n,column", [(100, 32), (1000, 512), (1537, 64)])
def test_onebit_bytes_match_documented_layout(n, column):
    g = grad(n)
    c = codecs.get("onebit", column=column)
    state = c.make_state(n)
    payload = c.encode(g, state)
    cols = (n + column - 1) // column
    levels, words = onebit_reference(g, column)
    np.testing.assert_array_equal(payload[:8 * cols].view(np.float32).view(np.uint32),
                                  levels.view(np.uint32))
    np.testing.assert_array_equal(payload[8 * cols:8 * cols + 4 * words.size].view(np.uint32), words)
    out = c.decode(payload, n=n)
    # the residual is exactly what was not sent (fp32 residual)
    np.testing.assert_array_equal(state.residual, g - out)


def int8_table():
    """The 128 magnitudes of int8_codec.h: mi = 2^(6-e) + j -> 10^-e (0.1 + 0.9 (j+1) / 2^(6-e))."""
    t = np.zeros(128)
    for e in range(7):
        m = 2 ** (6 - e)
        for j in range(m):
            t[m + j] = 10.0 ** -e * (0.1 + 0.9 * (j + 1) / m)
    return t


@pytest.mark.parametrize("n,block", [(1000, 512), (4096, 64), (77, 8)])
def test_int8_dynamic_tree(n, block):
    g = grad(n, 0.01)
    g[3] = 0.0
    c = codecs.get("int8", block=block)
    payload = c.encode(g)
    nb = (n + block - 1) // block
    absmax = payload[:4 * nb].view(np.float32)
    for b in range(nb):
        assert absmax[b] == np.abs(g[b * block:(b + 1) * block]).max()
    codes = payload[4 * nb:4 * nb + n]
    signs = (codes & 0x80) != 0
    nonzero = (codes & 0x7F) != 0
    assert np.array_equal(signs[nonzero], (g < 0)[nonzero])
    expect = np.where(signs, -1.0, 1.0) * int8_table()[codes & 0x7F] * np.repeat(absmax, block)[:n]
    out = c.decode(payload, n=n)
    np.testing.assert_allclose(out, expect, rtol=2e-7, atol=0)
    # nearest level: at most half of level 0's step (0.9 / 64) of the block maximum
    bound = np.repeat(absmax, block)[:n] * (0.9 / 128) * (1 + 1e-6)
    assert np.all(np.abs(out - g) <= bound)
    # each block's largest entry is sent exactly
    for b in range(nb):
        i = b * block + int(np.abs(g[b * block:(b + 1) * block]).argmax())
        assert out[i] == g[i]


@pytest.mark.parametrize("name,params", [("fp16", {}), ("bf16", {}), ("bf16", {"residual": "fp32"}),
                                         ("int8", {}), ("onebit", {}), ("topk", {"fraction": 0.1})])
def test_error_feedback_accumulates_the_residual(name, params):
    n = 3000
    c = codecs.get(name, **params)
    state = c.make_state(n, "bucket 0")
    total_in = np.zeros(n, np.float64)
    total_out = np.zeros(n, np.float64)
    for step in range(6):
        g = grad(n)
        before = state.residual.astype(np.float64)
        payload = c.encode(g, state)
        out = c.decode(payload, n=n)
        # residual_after = (g + residual_before) - decoded, in float32 (stored as bfloat16,
        # rounded to nearest even, where the state keeps a bf16 residual: fp16's default)
        expect = (g + before.astype(np.float32)) - out
        if state.residual_format == "bf16":
            expect = (bf16_rne(expect).astype(np.uint32) << 16).view(np.float32)
        np.testing.assert_array_equal(state.residual, expect)
        total_in += g
        total_out += out
    assert state.steps == 6
    # the error is delayed, not lost: sums of outputs track sums of inputs up to the residual
    np.testing.assert_allclose(total_out + state.residual, total_in, atol=1e-4)


def test_out_buffers_are_used_in_place():
    n = 1024
    c = codecs.get("int8")
    g = grad(n)
    out = np.zeros(c.encoded_bytes(n) // 4, np.uint32)  # any 4-byte aligned buffer
    r = c.encode(g, out=out)
    assert r is out and out.any()
    dec = np.full(n, 1.0, np.float32)
    assert c.decode(out, out=dec) is dec
    acc = dec.copy()
    c.decode(out, out=acc, accumulate=True)
    np.testing.assert_array_equal(acc, dec + dec)


def test_bad_input_is_value_error():
    c = codecs.get("fp16")
    with pytest.raises(ValueError, match="unknown codec"):
        codecs.get("zip")
    with pytest.raises(ValueError, match="unknown parameter"):
        codecs.get("int8", blok=3)
    with pytest.raises(ValueError, match="belongs to codec int8"):
        codecs.get("onebit", block=64)
    with pytest.raises(ValueError, match="not a power of two"):
        codecs.get("int8", block=100)
    with pytest.raises(ValueError, match="float64"):
        c.encode(np.zeros(10))
    with pytest.raises(ValueError, match="C-contiguous"):
        c.encode(np.zeros(20, np.float32)[::2])
    state = c.make_state(10)
    with pytest.raises(ValueError, match="10 elements; this gradient has 11"):
        c.encode(np.zeros(11, np.float32), state)
    with pytest.raises(ValueError, match="made by codec fp16"):
        codecs.get("int8").encode(np.zeros(10, np.float32), state)
    with pytest.raises(ValueError, match="bytes"):
        c.encode(np.zeros(10, np.float32), out=np.zeros(2, np.uint8))
    with pytest.raises(ValueError, match="out= or n="):
        c.decode(np.zeros(8, np.uint8))
    with pytest.raises(ValueError, match="payload"):
        c.decode(np.zeros(4, np.uint8), n=100)
    with pytest.raises(ValueError, match="read-only"):
        ro = np.zeros(10, np.float32)
        ro.flags.writeable = False
        c.decode(c.encode(np.zeros(10, np.float32)), out=ro)
    g = np.zeros(10, np.float32)
    g[4] = np.nan
    with pytest.raises(loom.NumericError, match="bucket"):
        c.encode(g, c.make_state(10, "bucket 7"))
