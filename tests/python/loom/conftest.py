"""What the package's tests share: one small run trained by the built loom (LOOM_BIN, which the
ctest script sets), read by the tests of trained models and of bad model files alike. Tests
copy what they damage; the run itself stays as trained."""
import os
import subprocess

import pytest

LOOM = os.environ.get("LOOM_BIN")


@pytest.fixture(scope="session")
def run(tmp_path_factory):
    """A directory holding `run/`: a 20-step MLP run on Fashion-MNIST, 1 worker."""
    if not LOOM or not os.access(LOOM, os.X_OK):
        pytest.skip("LOOM_BIN does not name the built loom (the ctest script sets it)")
    d = tmp_path_factory.mktemp("run")
    subprocess.run([LOOM, "train", "--set", "model=mlp", "--set", "workers=1", "--set",
                    "batch=32", "--set", "max_steps=20", "--set", "eval=false", "--set",
                    "progress=none", "--set", f"output.dir={d / 'run'}"],
                   check=True, capture_output=True)
    return d
