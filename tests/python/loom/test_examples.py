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
