"""The Python examples run to the end against the installed package (small settings)."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]


def run(script, *args):
    r = subprocess.run([sys.executable, str(ROOT / "examples" / script), *args],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_train_numpy(tmp_path):
    # An empty folder is not Fashion-MNIST: the example trains on its synthetic blobs.
    out = run("train_numpy.py", str(tmp_path), "--epochs", "1")
    assert "synthetic blobs" in out and "test accuracy" in out
    acc = float(out.split("test accuracy ")[1].split()[0])
    assert acc > 0.5  # ten blobs: far above the 0.1 of guessing


def test_advise():
    out = run("advise.py", "resnet50", "--budget", "80000")
    assert "ranked by time" in out and "ranked by total" in out and "samples/s" in out


def test_torch_onebit_optimizers():
    import pytest
    pytest.importorskip("torch")
    out = run("torch_onebit_optimizers.py", "--steps", "40")
    for name in ("OnebitAdam", "OnebitSGD"):
        losses = [float(line.rsplit("loss ", 1)[1]) for line in out.splitlines()
                  if line.startswith(name) and "loss " in line]
        assert len(losses) == 4, out
        assert losses[-1] < losses[0], out  # it learns
        assert f"{name}: rank 0 sent" in out
