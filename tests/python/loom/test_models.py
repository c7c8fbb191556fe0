"""loom.load(run).predict / .evaluate against the command line on the same run: predict equals
`loom predict --raw` bit for bit, evaluate's accuracy and loss equal what NumPy computes from
those logits. Needs the built loom (LOOM_BIN, which the ctest script passes) to train a run."""

import os
import subprocess

import numpy as np
import pytest

import loom

LOOM = os.environ.get("LOOM_BIN")


def test_predict_and_evaluate_match_the_cli(run):
    m = loom.load(run / "run")
    assert m.num_classes == 10 and m.outputs == 10
    rng = np.random.default_rng(3)
    X = rng.standard_normal((300,) + tuple(m.input_shape)).astype(np.float32)
    np.save(run / "x.npy", X)
    subprocess.run([LOOM, "predict", str(run / "run"), "--input", str(run / "x.npy"), "--raw",
                    "--output", str(run / "y.npy"), "--force"], check=True, capture_output=True)
    cli = np.load(run / "y.npy")
    logits = m.predict(X)
    assert logits.shape == (300, 10) and logits.dtype == np.float32
    np.testing.assert_array_equal(logits.view(np.uint32), cli.astype(np.float32).view(np.uint32))
    np.testing.assert_array_equal(m.predict(X.reshape(300, -1)), logits)

    y = rng.integers(0, 10, 300)
    r = m.evaluate(X, y)
    z = logits.astype(np.float64)
    z -= z.max(axis=1, keepdims=True)
    nll = np.log(np.exp(z).sum(axis=1)) - z[np.arange(300), y]
    assert r["count"] == 300
    assert r["accuracy"] == pytest.approx(np.mean(logits.argmax(axis=1) == y))
    assert r["loss"] == pytest.approx(nll.mean(), rel=1e-5)
    assert r["confusion"].sum() == 300
    assert r["confusion"][y[0]].sum() == np.sum(y == y[0])


def test_bad_input(run):
    with pytest.raises(FileNotFoundError):
        loom.load(run / "no-such-run")
    (run / "junk").mkdir(exist_ok=True)
    with pytest.raises(ValueError):
        loom.load(run / "junk")
    m = loom.load(run / "run")
    with pytest.raises(ValueError, match="input shape"):
        m.predict(np.zeros((3, 5), np.float32))
    with pytest.raises(ValueError, match="float64"):
        m.predict(np.zeros((3, 784)))
    with pytest.raises(ValueError, match="classes 0..9"):
        m.evaluate(np.zeros((2, 784), np.float32), np.array([1, 10]))
    with pytest.raises(ValueError, match="2 labels for 3 samples"):
        m.evaluate(np.zeros((3, 784), np.float32), np.array([1, 2]))
