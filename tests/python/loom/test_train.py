"""loom.train against `loom train` on the same data: the arrays written as NPY, converted to
shards with `loom data convert`, and trained by the built loom (LOOM_BIN) with the same config
and seed. The shard source and the in-memory source give the loader the same samples in the
same order, so the final weights, every epoch's training loss and the test figures must be equal
bit for bit. Then the errors each bad input raises."""

import json
import os
import subprocess

import numpy as np
import pytest

import loom

LOOM = os.environ.get("LOOM_BIN")

CONFIG = {
    "model": "mlp",
    "mlp": {"hidden": [32, 16], "dropout": 0.25},
    "batch": 16,
    "epochs": 3,
    "seed": 7,
    "optim": {"name": "sgd", "lr": 0.05, "momentum": 0.9},
    "lr": {"schedule": "cosine"},
    "train.log_every": 10,
}


def blobs(n, seed, classes=4, dims=12):
    """Gaussian blobs around fixed centres: separable, but not at the first step."""
    centres = np.random.default_rng(0).standard_normal((classes, dims)) * 1.5
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    y[:classes] = np.arange(classes)  # every class present in every set
    X = centres[y] + rng.standard_normal((n, dims))
    return X.astype(np.float32), y.astype(np.int64)


@pytest.fixture(scope="module")
def data():
    return blobs(480, 1), blobs(200, 2)


def need_cli():
    if not LOOM or not os.access(LOOM, os.X_OK):
        pytest.skip("LOOM_BIN does not name the built loom (the ctest script sets it)")


def cli_run(tmp, data, workers, config_sets):
    (X, y), (Xt, yt) = data
    for name, a in [("x", X), ("y", y), ("xt", Xt), ("yt", yt)]:
        np.save(tmp / f"{name}.npy", a)
    for src, labels, dst in [("x", "y", "train"), ("xt", "yt", "test")]:
        subprocess.run([LOOM, "data", "convert", str(tmp / f"{src}.npy"), str(tmp / f"{dst}.shard"),
                        "--labels", str(tmp / f"{labels}.npy")], check=True, capture_output=True)
    out = tmp / f"cli-{workers}"
    sets = config_sets + [f"workers={workers}", f"data.train_shards={tmp / 'train.shard'}",
                          f"data.test_shards={tmp / 'test.shard'}", f"output.dir={out}",
                          "progress=none"]
    subprocess.run([LOOM, "train"] + [a for s in sets for a in ("--set", s)], check=True,
                   capture_output=True)
    summary = json.loads((out / "summary.json").read_text())
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return out, summary, metrics


def toml_sets(config):
    """CONFIG as --set key=value arguments."""
    out = []

    def walk(prefix, t):
        for k, v in t.items():
            key = f"{prefix}.{k}" if prefix else k
            if isinstance(v, dict):
                walk(key, v)
            elif isinstance(v, str):
                out.append(f'{key}="{v}"')
            elif isinstance(v, list):
                out.append(f"{key}=[{', '.join(map(str, v))}]")
            else:
                out.append(f"{key}={v}")
    walk("", config)
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_train_equals_the_cli_bit_for_bit(tmp_path, data, workers):
    need_cli()
    out, summary, metrics = cli_run(tmp_path, data, workers, toml_sets(CONFIG))
    run = loom.train(dict(CONFIG, workers=workers), train=data[0], test=data[1])

    assert run.dir is None  # no output.dir: nothing written
    assert run.summary["params_fnv1a64"] == summary["params_fnv1a64"]
    assert run.summary["test_acc"] == summary["test_acc"]
    assert run.summary["test_loss"] == summary["test_loss"]
    assert run.summary["steps"] == summary["steps"] == 3 * (480 // (16 * workers))
    # The blobs are learnt: well above the 0.25 of guessing.
    assert run.summary["test_acc"] > 0.8

    def figures(lines):
        return [(m["kind"], m["epoch"], m.get("step"), m["train_loss"], m["train_acc"])
                for m in lines]
    assert figures(run.metrics) == figures(metrics)
    assert [m["kind"] for m in run.metrics].count("epoch") == 3

    from safetensors.numpy import load_file
    cli_weights = load_file(str(out / "model.safetensors"))
    assert sorted(run.parameters) == sorted(cli_weights)
    for name, w in run.parameters.items():
        assert w.dtype == np.float32 and w.shape == cli_weights[name].shape
        np.testing.assert_array_equal(w.view(np.uint32), cli_weights[name].view(np.uint32))

    Xt = data[1][0]
    np.testing.assert_array_equal(run.model.predict(Xt).view(np.uint32),
                                  loom.load(out).predict(Xt).view(np.uint32))
    assert run.model.steps == summary["steps"]
    # The run evaluated with the config's 1 thread. At 1 worker that is one forward of the 200
    # samples, as evaluate's, so the same bits; at 2 each rank took 100, other GEMM shapes, so
    # the logits agree to rounding and only a near tie's argmax may differ (docs/determinism.md).
    ev = run.model.evaluate(*data[1], threads=1)
    if workers == 1:
        assert ev["accuracy"] == summary["test_acc"]
    else:
        assert ev["accuracy"] == pytest.approx(summary["test_acc"], abs=2 / 200)


def test_config_forms_agree(tmp_path, data):
    """A nested dict, dotted keys and a TOML file give the same run."""
    base = loom.train(CONFIG, train=data[0], test=data[1])
    dotted = {"model": "mlp", "mlp.hidden": [32, 16], "mlp.dropout": 0.25, "batch": 16,
              "epochs": 3, "seed": 7, "optim.name": "sgd", "optim.lr": 0.05,
              "optim.momentum": 0.9, "lr.schedule": "cosine", "train.log_every": 10}
    assert loom.train(dotted, train=data[0], test=data[1]).summary["params_fnv1a64"] == \
        base.summary["params_fnv1a64"]
    toml = tmp_path / "c.toml"
    toml.write_text("\n".join(s.replace("=", " = ", 1) for s in toml_sets(CONFIG)) + "\n")
    assert loom.train(toml, train=data[0], test=data[1]).summary["params_fnv1a64"] == \
        base.summary["params_fnv1a64"]


def test_output_dir(tmp_path, data):
    run = loom.train(dict(CONFIG, epochs=1, output={"dir": str(tmp_path / "r")}),
                     train=data[0], test=data[1])
    assert run.dir == str(tmp_path / "r")
    for f in ["config.toml", "metrics.jsonl", "summary.json", "model.safetensors"]:
        assert (tmp_path / "r" / f).is_file()
    lines = [json.loads(l) for l in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert [l["train_loss"] for l in lines] == [m["train_loss"] for m in run.metrics]
    X = data[1][0]
    np.testing.assert_array_equal(loom.load(run.dir).predict(X), run.model.predict(X))
    with pytest.raises(ValueError, match="holds"):  # never overwrites a run without force
        loom.train(dict(CONFIG, epochs=1, output={"dir": str(tmp_path / "r")}),
                   train=data[0], test=data[1])
    loom.train(dict(CONFIG, epochs=1, output={"dir": str(tmp_path / "r")}), train=data[0],
               test=data[1], force=True)


def test_regression_targets():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((6, 2))
    X = rng.standard_normal((400, 6)).astype(np.float32)
    Y = (X @ w).astype(np.float32)
    cfg = {"model": "mlp", "mlp": {"hidden": [16], "dropout": 0.0}, "batch": 20, "epochs": 5,
           "loss.type": "mse", "optim": {"lr": 0.02}}
    run = loom.train(cfg, train=(X[:300], Y[:300]), test=(X[300:], Y[300:]))
    assert run.summary["test_acc"] is None
    # Far below predicting zero (the targets' mean square per output).
    assert run.summary["test_loss"] < 0.1 * float(np.mean(Y[300:] ** 2))
    assert run.model.predict(X[:3]).shape == (3, 2)


def test_bad_inputs(tmp_path, data):
    (X, y), (Xt, yt) = data
    cfg = dict(CONFIG, epochs=1)
    with pytest.raises(ValueError, match="float32"):
        loom.train(cfg, train=(X.astype(np.float64), y))
    with pytest.raises(ValueError, match="shape"):
        loom.train(cfg, train=(X[:, 0].copy(), y))
    with pytest.raises(ValueError, match="one row per sample"):
        loom.train(cfg, train=(X, y[:-1]))
    with pytest.raises(ValueError, match="C-contiguous"):
        loom.train(cfg, train=(np.asfortranarray(X), y))
    with pytest.raises(ValueError, match="class labels"):
        loom.train(cfg, train=(X, -y))
    with pytest.raises(ValueError, match="optim.lrr"):
        loom.train(dict(cfg, **{"optim.lrr": 0.1}), train=(X, y))
    for key in ["data.dir", "data.train_shards", "data.test_shards"]:
        with pytest.raises(ValueError, match=key):
            loom.train(dict(cfg, **{key: str(tmp_path / "nowhere")}), train=(X, y))
    with pytest.raises(ValueError, match="mse"):
        loom.train(cfg, train=(X, y.astype(np.float32)))
    with pytest.raises(ValueError, match="shape"):
        loom.train(cfg, train=(X, y), test=(Xt[:, :5].copy(), yt))
    with pytest.raises(ValueError, match="larger than"):
        loom.train(dict(cfg, batch=1000), train=(X, y))
    with pytest.raises(FileNotFoundError):
        loom.train(tmp_path / "missing.toml", train=(X, y))
    with pytest.raises(ValueError, match="config key"):
        loom.train(dict(cfg, seed=object()), train=(X, y))
    with pytest.raises(ValueError):
        loom.train(dict(cfg, seed="seven"), train=(X, y))
    # Nothing half-done: a good run still works after every refusal.
    assert loom.train(cfg, train=(X, y), test=(Xt, yt)).summary["steps"] == 480 // 16
