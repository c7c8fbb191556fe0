"""loom.scale and loom.advise against `loom scale --json` and `loom advise --json` run by the
built loom (LOOM_BIN) with the same flags: the same dicts, number for number."""

import json
import os
import pathlib
import subprocess

import pytest

import loom

LOOM = os.environ.get("LOOM_BIN")
ROOT = pathlib.Path(__file__).resolve().parents[3]


def cli(*args):
    if not LOOM or not os.access(LOOM, os.X_OK):
        pytest.skip("LOOM_BIN does not name the built loom (the ctest script sets it)")
    out = subprocess.run([LOOM, *args], check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith(("{", "["))]


@pytest.mark.parametrize("workload", ["resnet50", str(ROOT / "configs" / "mlp.toml")])
def test_scale_equals_the_cli(workload):
    lines = cli("scale", "-w", workload, "--gpu", "a100-80gb-sxm4", "--nodes", "4",
                "--gpus-per-node", "4", "--inter", "10gbe", "--codec", "fp32,int8",
                "--batch", "64", "--json", "--svg", "")
    points = loom.scale(workload, gpu="a100-80gb-sxm4", nodes=4, gpus_per_node=4, inter="10gbe",
                        codecs=["fp32", "int8"], batch=64)
    # Per codec: 1, 2 and 4 GPUs on one node, then 2 and 4 nodes of 4.
    assert [p["gpus"] for p in points] == [1, 2, 4, 8, 16] * 2
    assert points == lines
    assert points[0]["speedup"] == 1
    # The model's band at each size, wider with the scaling error past one GPU, and the
    # framework term's range around the rate.
    assert 0 < points[0]["band"] < points[-1]["band"]
    p = points[0]
    assert p["slowest_software_samples_per_s"] < p["samples_per_s"] < p["fastest_software_samples_per_s"]


def test_scale_options_reach_the_model():
    base = loom.scale("resnet50", nodes=2)
    assert loom.scale("resnet50", derate=0.4)[0]["band"] is None  # not the model's compute
    assert loom.scale("resnet50", nodes=2, overlap=False)[-1]["step_s"] > base[-1]["step_s"]
    assert loom.scale("resnet50", nodes=2, sync="bmuf", tau=4)[-1]["series"] == "bmuf fp32 tau=4"
    # PyTorch's default memory format costs tensor-core convolutions cuDNN's transposes; fp32 none.
    mixed = loom.scale("resnet50", gpu="a100-80gb-sxm4", precision="bf16")[0]["step_s"]
    nchw = loom.scale("resnet50", gpu="a100-80gb-sxm4", precision="bf16", layout="nchw")
    assert nchw[0]["step_s"] > mixed
    assert (loom.scale("resnet50", precision="fp32", layout="nchw")[0]["step_s"]
            == loom.scale("resnet50", precision="fp32")[0]["step_s"])


@pytest.mark.parametrize("args,kwargs", [
    (["--budget", "60000"], dict(budget=60000)),
    (["--budget", "200000", "--rank-by", "capital", "--top", "4", "--no-cloud"],
     dict(budget=200000, rank_by="capital", top=4, cloud=False)),
    (["--budget", "30000", "--link", "10gbe", "--gpu", "rtx-4090", "--gpu", "a100-80gb-pcie",
      "--hours", "2000"],
     dict(budget=30000, links=["10gbe"], gpus=["rtx-4090", "a100-80gb-pcie"], hours=2000)),
])
def test_advise_equals_the_cli(args, kwargs):
    (line,) = cli("advise", "-m", "resnet50", *args, "--json")
    advice = loom.advise("resnet50", **kwargs)
    assert advice == line
    assert len(advice["ranked"]) <= kwargs.get("top", 10)
    assert advice["ranked"], "the budget buys something"
    if kwargs.get("cloud") is False:
        assert advice["rented"] == []


def test_advise_ranks_by_what_it_says():
    a = loom.advise("resnet50", budget=200000, rank_by="capital")
    keys = [o["samples_per_kusd"] for o in a["ranked"]]
    assert keys == sorted(keys, reverse=True)


def test_bad_requests():
    with pytest.raises(ValueError):
        loom.scale("no-such-workload")
    with pytest.raises(ValueError):
        loom.scale("resnet50", gpu="no-such-gpu")
    with pytest.raises(ValueError, match="layout"):
        loom.scale("resnet50", layout="chwn")
    with pytest.raises(ValueError, match="rank_by"):
        loom.advise("resnet50", budget=1000, rank_by="speed")
    with pytest.raises(ValueError, match="budget"):
        loom.advise("resnet50", budget=0)
    with pytest.raises((ValueError, OSError)):
        loom.scale(str(ROOT / "no-such-config.toml"))
