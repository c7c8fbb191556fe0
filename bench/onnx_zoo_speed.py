#!/usr/bin/env python3
"""Training speed of torchvision networks imported into loom from ONNX, against PyTorch on the
same network and batch, in the same run (docs/models.md, "The zoo").

  .venv/bin/python bench/onnx_zoo_speed.py [--models resnet18,mobilenet_v2] [--size 64]
      [--batch 32] [--steps 12] [--rounds 3] [--threads 1] [--loom build/loom]

For each network: torch 1.13 exports it in training mode at opset 14 (as tests/python/
onnx_zoo.py does), `loom data convert` makes a shard of batch x steps random images, and each
round runs, one after another at --threads threads,
  - `loom train` of the file (SGD lr 0.01 momentum 0.9, evaluation off), for --steps steps and
    for 2: samples/s = batch x (steps - 2) / the difference of their summary.json wall_s, so
    that import, start-up and the first two steps (oneDNN's primitive creation) count for loom
    as little as for the peers;
  - the peers of bench/peers/torch_vision_train.py: PyTorch 1.13 eager (.venv), the newest
    PyTorch eager, eager in channels-last and with torch.compile (.venv-torch;
    scripts/setup-bench), where present:
    the median over steps after the second.
Each line gives a round's rates and loom over the fastest peer; the last line per network the
best of each over the rounds, and their ratio. The machine's load moves everyone, so compare
ratios. JSON lines follow the table ({"bench": "onnx_zoo_speed", ...}).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEER = os.path.join(HERE, "peers", "torch_vision_train.py")


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            flags, model = "", ""
            for line in f:
                if line.startswith("model name") and not model:
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags") and not flags:
                    flags = line
        isa = "AVX-512" if " avx512f" in flags else "AVX2" if " avx2" in flags else "SSE"
        return f"{model} ({isa})"
    except OSError:
        return "unknown CPU"


def peers(args):
    out = []
    venv, venv_torch = os.path.join(ROOT, ".venv/bin/python"), os.path.join(ROOT, ".venv-torch/bin/python")
    if os.path.exists(venv):
        out.append(("torch-1.13", venv, []))
    if os.path.exists(venv_torch):
        out.append(("torch-new", venv_torch, []))
        out.append(("torch-new-channels-last", venv_torch, ["--channels-last"]))
        if not args.no_compile:
            out.append(("torch-new-compiled", venv_torch, ["--compile"]))
    return out


def run_peer(args, model, python, extra):
    r = subprocess.run([python, PEER, "--model", model, "--size", str(args.size), "--batch",
                        str(args.batch), "--steps", str(args.steps), "--threads",
                        str(args.threads)] + extra, capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT"):
            fields = dict(kv.split("=", 1) for kv in line.split()[1:])
            return float(fields["median_samples_per_s"]), fields["torch"]
    return None, (r.stderr.strip().splitlines() or ["no RESULT"])[-1][:120]


def loom_wall(args, work, onnx, shard, steps):
    cfg = os.path.join(work, "run.toml")
    with open(cfg, "w") as f:
        f.write(f'model = "{onnx}"\nbatch = {args.batch}\nmax_steps = {steps}\nepochs = 1\n'
                f'seed = 0\nthreads = {args.threads}\neval = false\nprogress = "none"\n'
                f'[data]\ntrain_shards = "{shard}"\n'
                f'[optim]\nname = "sgd"\nlr = 0.01\nmomentum = 0.9\n'
                f'[output]\ndir = "{os.path.join(work, "run")}"\n')
    r = subprocess.run([args.loom, "train", cfg, "--force"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"onnx_zoo_speed: loom train failed:\n{r.stderr}")
    with open(os.path.join(work, "run", "summary.json")) as f:
        return float(json.load(f)["wall_s"])


def run_loom(args, work, onnx, shard):
    full = loom_wall(args, work, onnx, shard, args.steps)
    return args.batch * (args.steps - 2) / (full - loom_wall(args, work, onnx, shard, 2))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet18,mobilenet_v2")
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    p.add_argument("--loom", default=os.path.join(ROOT, "build", "loom"))
    args = p.parse_args()
    if args.steps < 4:
        p.error("--steps must be at least 4")
    warnings.filterwarnings("ignore")
    import numpy as np
    import torch
    import torchvision
    torch.set_num_threads(args.threads)
    print(f"CPU: {cpu_name()}; {args.threads} thread(s), batch {args.batch}, "
          f"3 x {args.size} x {args.size}, {args.steps} steps, {args.rounds} rounds")
    results = []
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory() as work:
            torch.manual_seed(0)
            model = getattr(torchvision.models, name)(num_classes=10).train()
            # torch.onnx cannot export stochastic depth's Bernoulli noise in training mode; the
            # peer turns it off too (bench/peers/torch_vision_train.py).
            for m in model.modules():
                if type(m).__name__ == "StochasticDepth":
                    m.p = 0.0
            onnx = os.path.join(work, "net.onnx")
            torch.onnx.export(model, torch.randn(2, 3, args.size, args.size), onnx,
                              opset_version=14, training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False, input_names=["x"],
                              output_names=["y"], dynamic_axes={"x": {0: "b"}, "y": {0: "b"}})
            n = args.batch * args.steps
            rng = np.random.default_rng(0)
            np.save(os.path.join(work, "x.npy"),
                    rng.standard_normal((n, 3, args.size, args.size), np.float32))
            np.save(os.path.join(work, "y.npy"), (np.arange(n) % 10).astype(np.int64))
            shard = os.path.join(work, "train.shard")
            subprocess.run([args.loom, "data", "convert", os.path.join(work, "x.npy"), shard,
                            "--labels", os.path.join(work, "y.npy"), "--classes", "10"],
                           check=True, capture_output=True)
            best = {}
            for r in range(1, args.rounds + 1):
                rates = {"loom": run_loom(args, work, onnx, shard)}
                versions = {}
                for peer, python, extra in peers(args):
                    rate, version = run_peer(args, name, python, extra)
                    if rate is not None:
                        rates[peer] = rate
                        versions[peer] = version
                    elif r == 1:
                        print(f"  {peer}: no figure ({version})")
                for k, v in rates.items():
                    best[k] = max(best.get(k, 0.0), v)
                fastest = max((v, k) for k, v in rates.items() if k != "loom")
                line = ", ".join(f"{k} {v:.1f}" for k, v in rates.items())
                print(f"{name} round {r}: {line} samples/s; loom / {fastest[1]} "
                      f"{rates['loom'] / fastest[0]:.2f}", flush=True)
            fastest = max((v, k) for k, v in best.items() if k != "loom")
            print(f"{name} best of {args.rounds}: " +
                  ", ".join(f"{k} {v:.1f}" for k, v in best.items()) +
                  f" samples/s; loom / fastest ({fastest[1]}, {versions.get(fastest[1], '')}) "
                  f"{best['loom'] / fastest[0]:.2f}", flush=True)
            results.append({"bench": "onnx_zoo_speed", "model": name, "cpu": cpu_name(),
                            "threads": args.threads, "batch": args.batch, "size": args.size,
                            "best": best, "fastest_peer": fastest[1],
                            "ratio": best["loom"] / fastest[0]})
    for r in results:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
