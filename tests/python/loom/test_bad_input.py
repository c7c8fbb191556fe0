"""Bad input from Python, each refused as the command line refuses it: codec payloads
of the wrong size or of garbage bytes, a model file whose metadata is damaged, NaN inputs to
predict. The CLI side of each pair runs the built loom (LOOM_BIN, which the ctest script sets);
those checks skip without it."""

import json
import os
import struct
import subprocess

import numpy as np
import pytest

import loom
from loom import codecs

LOOM = os.environ.get("LOOM_BIN")
RNG = np.random.default_rng(44)


# ---- codec payloads ----

def payload(name, n, **params):
    c = codecs.get(name, **params)
    return c, c.encode((RNG.standard_normal(n)).astype(np.float32))


@pytest.mark.parametrize("name", codecs.names())
def test_a_payload_decoded_as_another_size_is_a_value_error(name):
    c, p = payload(name, 1000)
    with pytest.raises(ValueError, match="payload: not a .* payload of 100 elements"):
        c.decode(p, n=100)
    with pytest.raises(ValueError, match="payload"):
        c.decode(p[:-4], n=1000)
    with pytest.raises(ValueError, match="payload"):
        c.decode(np.concatenate([p, np.zeros(4, np.uint8)]), n=1000)
    np.testing.assert_array_equal(c.decode(p, n=1000), c.decode(p.copy(), out=np.empty(1000, np.float32)))


def test_topk_payload_into_a_shorter_output_is_refused():
    # 1000 elements at fraction 0.01 and 950 both send 10 entries: the same size, so the indices
    # are what tells them apart.
    c, p = payload("topk", 1000)
    idx = p.view(np.uint32)[0::2]
    if idx.max() >= 950:
        with pytest.raises(ValueError, match="has index"):
            c.decode(p, n=950)
    bad = p.copy()
    bad.view(np.uint32)[2] = bad.view(np.uint32)[0]  # entry 1 repeats entry 0's index
    with pytest.raises(ValueError, match="indices ascend"):
        c.decode(bad, n=1000)
    bad = p.copy()
    bad.view(np.uint32)[0] = 0xFFFFFFFF
    with pytest.raises(ValueError, match="entry 0 has index 4294967295"):
        c.decode(bad, n=1000)


@pytest.mark.parametrize("name", ["fp32", "fp16", "bf16", "int8", "onebit", "topk", "powersgd"])
def test_garbage_payloads_are_value_errors_or_finite(name):
    c = codecs.get(name)
    n = 777
    size = c.encoded_bytes(n)
    refused = 0
    for seed in range(200):
        junk = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)
        out = np.full(n, 5.0, np.float32)
        try:
            c.decode(junk, out=out)
        except ValueError as e:
            assert "payload" in str(e)
            assert (out == 5.0).all(), "a refused payload changed the output"
            refused += 1
            continue
        assert np.isfinite(out).all(), f"{name}: garbage decoded to non-finite values"
    # Uniform bytes are NaN-shaped somewhere in most payloads of every codec but int8's codes,
    # topk's indices and onebit's signs; each codec's invariants catch most of them.
    assert refused > 0


def test_decode_into_accumulate_leaves_out_alone_on_refusal():
    c, p = payload("int8", 64)
    bad = p.copy()
    bad.view(np.float32)[0] = np.nan  # the block's absmax
    acc = np.ones(64, np.float32)
    with pytest.raises(ValueError, match="absmax nan"):
        c.decode(bad, out=acc, accumulate=True)
    assert (acc == 1.0).all()


# ---- a trained run's model file, and predict's input ----


def with_metadata(src, dst, **changes):
    """Copies a safetensors file with its metadata keys changed (None removes one)."""
    raw = open(src, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header["__metadata__"]
    for k, v in changes.items():
        if v is None:
            meta.pop(k, None)
        else:
            meta[k] = v
    text = json.dumps(header).encode()
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + raw[8 + n:])


BAD_METADATA = [
    ({"input_stddev": "0"}, "input_stddev"),
    ({"input_stddev": "nan"}, "input_stddev"),
    ({"input_mean": "NaN"}, "input_mean"),
    ({"input_mean": "zero"}, "input_mean"),
    ({"input_stddev": "-1"}, "input_stddev"),
    ({"input_stddev": None}, "without \"input_stddev\""),
    ({"steps": "many"}, "steps"),
    ({"loss": "hinge"}, "loss"),
]


@pytest.mark.parametrize("change,key", BAD_METADATA)
def test_damaged_model_metadata_is_refused_by_python_and_the_cli(run, tmp_path, change, key):
    model = run / "run" / "model.safetensors"
    meta = json.loads(open(model, "rb").read()[8:8 + struct.unpack("<Q", open(model, "rb").read(8))[0]])
    assert "input_mean" in meta["__metadata__"], "the run records its input normalisation"
    bad = tmp_path / "bad" / "model.safetensors"
    with_metadata(model, str(bad), **change)
    with pytest.raises(ValueError, match=f"model.safetensors: metadata.*{key}"):
        loom.load(str(bad))
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((2, 1, 28, 28), np.float32))
    for cmd in (["predict", str(bad), "--input", str(x), "--output", str(tmp_path / "y.npy")],
                ["eval", str(bad)],
                ["export", str(bad), "--weights", str(tmp_path / "w.safetensors")]):
        r = subprocess.run([LOOM] + cmd, capture_output=True, text=True)
        assert r.returncode == 2, (cmd, r.returncode, r.stdout, r.stderr)
        assert "model.safetensors: metadata" in r.stderr and key in r.stderr, r.stderr
    assert not (tmp_path / "w.safetensors").exists()


def test_nan_inputs_to_predict_are_refused_by_python_and_the_cli(run, tmp_path):
    m = loom.load(str(run / "run"))
    x = np.zeros((3,) + tuple(m.input_shape), np.float32)
    x[2, 0, 5, 7] = np.nan
    with pytest.raises(ValueError, match="X: sample 2 value .* is nan"):
        m.predict(x)
    with pytest.raises(ValueError, match="X: sample 2"):
        m.evaluate(x, np.zeros(3, np.int64))
    np.save(tmp_path / "x.npy", x)
    r = subprocess.run([LOOM, "predict", str(run / "run"), "--input", str(tmp_path / "x.npy"),
                        "--output", str(tmp_path / "y.npy")], capture_output=True, text=True)
    assert r.returncode == 2 and "record 2" in r.stderr, r.stderr


def test_empty_delimiter_is_a_clean_error(run, tmp_path):
    (tmp_path / "x.csv").write_text("0.5\n")
    r = subprocess.run([LOOM, "predict", str(run / "run"), "--input", str(tmp_path / "x.csv"),
                        "--output", str(tmp_path / "y.csv"), "--delimiter", ""],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--delimiter" in r.stderr, (r.returncode, r.stderr)
    assert not (tmp_path / "y.csv").exists()


def test_nan_training_arrays_are_refused_as_convert_refuses_them():
    X = np.zeros((8, 4), np.float32)
    X[5, 1] = np.inf
    with pytest.raises(ValueError, match="train X: sample 5 value 1 is inf"):
        loom.train({"model": "mlp", "max_steps": 1}, train=(X, np.zeros(8, np.int64)))
    X[5, 1] = 0
    t = np.zeros(8, np.float32)
    t[3] = np.nan
    with pytest.raises(ValueError, match="train y: sample 3 target 0 is nan"):
        loom.train({"model": "mlp", "max_steps": 1}, train=(X, t))


def test_export_keeps_what_it_read(tmp_path):
    """`loom export` writes the metadata it checked, the loss included: a regression model
    exported stays a regression model (it was written back as a classifier)."""
    if not LOOM or not os.access(LOOM, os.X_OK):
        pytest.skip("LOOM_BIN does not name the built loom (the ctest script sets it)")
    X = RNG.standard_normal((64, 3)).astype(np.float32)
    y = (X @ np.array([1.0, -2.0, 0.5], np.float32)).astype(np.float32)
    loom.train({"model": "mlp", "max_steps": 4, "batch": 16, "loss": {"type": "mse"},
                "output": {"dir": str(tmp_path / "r")}}, train=(X, y))
    out = tmp_path / "exported.safetensors"
    subprocess.run([LOOM, "export", str(tmp_path / "r"), "--weights", str(out)], check=True,
                   capture_output=True)
    raw = open(out, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert json.loads(raw[8:8 + n])["__metadata__"]["loss"] == "mse"
    assert loom.load(str(out)).predict(X).shape == (64, 1)
