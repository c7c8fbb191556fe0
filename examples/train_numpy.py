#!/usr/bin/env python3
"""Train with loom's trainer on NumPy arrays, in this process (docs/python.md, "Training").

Fashion-MNIST when its IDX files are installed (apt-get install dataset-fashion-mnist; pass
another folder as the first argument), else a synthetic set of Gaussian blobs, so the example
runs anywhere. Two workers (threads) train the config's MLP; the metrics, the final weights and
the trained model come back as Python objects.

    .venv/bin/pip install .          # once (docs/python.md)
    .venv/bin/python examples/train_numpy.py [FASHION_MNIST_DIR] [--epochs N]
"""

import argparse
import gzip
import os

import numpy as np

import loom


def read_idx(path):
    """An IDX file (gzipped or not) as a NumPy array: magic, dims, then the big-endian data."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(shape)


def fashion_mnist(folder):
    def load(stem):
        for name in (f"{stem}.gz", stem):
            if os.path.exists(os.path.join(folder, name)):
                return read_idx(os.path.join(folder, name))
        return None
    parts = [load(s) for s in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                               "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")]
    if any(p is None for p in parts):
        return None
    Xtr, ytr, Xte, yte = parts
    # As loom train normalises IDX pixels: x/255, then the training set's mean and stddev.
    scaled = Xtr.astype(np.float64) / 255
    mean, std = scaled.mean(), scaled.std(ddof=1)

    def norm(X):
        return ((X.astype(np.float32) / 255 - mean) / std).astype(np.float32)[:, None]
    return (norm(Xtr), ytr.astype(np.int64)), (norm(Xte), yte.astype(np.int64)), "Fashion-MNIST"


def blobs(n_train=6000, n_test=1000, classes=10, dims=64, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((classes, dims)) * 0.6
    def draw(n):
        y = rng.integers(0, classes, n)
        return (centres[y] + rng.standard_normal((n, dims))).astype(np.float32), y
    return draw(n_train), draw(n_test), "synthetic blobs"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="?", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=0)
    args = ap.parse_args()
    data = fashion_mnist(args.data) if os.path.isdir(args.data) else None
    train, test, name = data or blobs()
    print(f"{name}: {len(train[0])} training and {len(test[0])} test samples of shape "
          f"{train[0].shape[1:]}")

    config = {
        "model": "mlp",
        "mlp": {"hidden": [256, 128], "dropout": 0.2},
        "workers": 2,          # threads of this process
        "batch": 64,           # per worker
        "epochs": args.epochs,
        "max_steps": args.max_steps,
        "seed": 0,
        "optim": {"name": "sgd", "lr": 0.05, "momentum": 0.9},
        "lr": {"schedule": "cosine"},
    }
    run = loom.train(config, train=train, test=test, progress=True)

    for m in run.epochs:
        print(f"epoch {m['epoch']}: train loss {m['train_loss']:.4f}, "
              f"{m['samples_per_s']:.0f} samples/s")
    print(f"test accuracy {run.summary['test_acc']:.4f} after {run.summary['steps']} steps")
    for name, w in run.parameters.items():
        print(f"  {name:<18} {str(w.shape):<12} |w| {np.abs(w).mean():.4f}")
    logits = run.model.predict(test[0][:5])
    print("first test predictions:", logits.argmax(axis=1), "labels:", test[1][:5])


if __name__ == "__main__":
    main()
