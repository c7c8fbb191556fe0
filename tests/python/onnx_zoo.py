"""The ONNX zoo check: torchvision's classification models and three transformers, exported from
PyTorch, imported, compared, trained and exported back by loom.

For each model: build it with 10 classes, run two training-mode forwards so that its BatchNorm
statistics are off their initial values, export it twice at opset 14 (in training mode, the
file loom trains from, and in evaluation mode with constant folding off, the file onnxruntime
runs), then
  - import: loom reads the training-mode file (tests/tools/onnx_forward.cc, the same importer
    as `model = "net.onnx"`);
  - forward: loom's evaluation forward on 2 random inputs against onnxruntime's on the
    evaluation-mode file, as max |difference| / max |onnxruntime's output|;
  - train: `loom data convert` of 12 random samples of the model's input shape to a shard, then
    `loom train` of the file for one epoch of 3 SGD steps on it (lr 0.001: steps large enough
    to blow a network's outputs up to the hundreds make its last digits depend on the order of
    any runtime's sums, which the export check below would read as a difference); its loss
    must be finite;
  - export: `loom export --onnx` of the trained run, then onnxruntime's forward on that file
    against loom's import of it, on the same 2 inputs, as for forward.
One line per model; with --check, the exit status is 1 unless every model listed imports,
agrees within --tolerance, trains, and exports to a file whose two readings agree as closely.

Models whose stochastic depth draws Bernoulli noise (which torch.onnx 1.13 cannot export in
training mode) are exported with its probability set to 0 and say so.

usage: onnx_zoo.py --loom build/loom --forward build/tests/loom_onnx_forward
                   [--models a,b,... | --all] [--check] [--tolerance 1e-4] [--work DIR]
"""
import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

QUICK = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "shufflenet_v2_x0_5", "mnasnet0_5",
         "squeezenet1_1", "regnet_y_400mf", "efficientnet_b0", "googlenet", "densenet121",
         "swin_t", "gpt_small", "transformer_encoder", "gpt_mha", "vit_tiny"]
# Transformers over [positions, features] inputs, beside torchvision's image classifiers:
# gpt_small is nanoGPT's attention written op by op (tests/nn/make_onnx_fixtures.py's Gpt);
# transformer_encoder is nn.TransformerEncoder (batch_first, nn.MultiheadAttention inside);
# gpt_mha is a GPT written with nn.MultiheadAttention and a causal attn_mask (GptMha);
# vit_tiny is torchvision's VisionTransformer made small (32 x 32 images, two blocks), the
# network of vit_b_16 and the others at a size the quick list can afford.
TRANSFORMERS = ["gpt_small", "transformer_encoder", "gpt_mha", "vit_tiny"]
SEQUENCE = (16, 8)
# Input sizes other than 64 x 64: fixed-size classifiers and heads that need larger maps.
SIZE = {"alexnet": 224, "inception_v3": 299, "maxvit_t": 224}
SIZE.update({f"vgg{d}{bn}": 224 for d in (11, 13, 16, 19) for bn in ("", "_bn")})
SIZE.update({f"vit_{v}": 224 for v in ("b_16", "b_32", "l_16", "l_32", "h_14")})
CLASSES = 10


def build_transformer(torch, name):
    nn = torch.nn
    if name == "vit_tiny":
        from torchvision.models.vision_transformer import VisionTransformer
        return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                 hidden_dim=32, mlp_dim=64, num_classes=CLASSES)
    if name in ("gpt_small", "gpt_mha"):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "nn"))
        from make_onnx_fixtures import Gpt, GptMha
        return (Gpt if name == "gpt_small" else GptMha)(features=SEQUENCE[1], d=32, heads=4,
                                                         t=SEQUENCE[0])

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(SEQUENCE[1], 32)
            layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 2)
            self.head = nn.Linear(32, CLASSES)

        def forward(self, x):
            return self.head(self.enc(self.inp(x))[:, -1])
    return Encoder()


def build(models, name):
    kw = {"num_classes": CLASSES}
    if name in ("googlenet", "inception_v3"):
        kw.update(aux_logits=False, init_weights=True)
    return getattr(models, name)(**kw)


def export(torch, model, x, path, training):
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    model.train(training)
    torch.onnx.export(model, x, path, opset_version=14, training=mode, do_constant_folding=False,
                      input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})


def first_line(text):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:240] if lines else ""


def one(args, torch, models, ort, name, work):
    row = {"model": name, "params": None, "import": "", "forward": None, "train": "", "note": "",
           "export": None}
    size = SIZE.get(name, 64)
    shape = ((3, 32, 32) if name == "vit_tiny" else SEQUENCE if name in TRANSFORMERS else
             (3, size, size))
    torch.manual_seed(0)
    try:
        model = (build_transformer(torch, name) if name in TRANSFORMERS else
                 build(models, name))
    except Exception as e:  # noqa: BLE001 - the line reports any failure
        row["import"] = f"not built: {e}"[:200]
        return row
    row["params"] = sum(p.numel() for p in model.parameters())
    # Weights that start at zero (ViT's head and class token) would make the forward check
    # compare zeros with zeros: they get small random values.
    with torch.no_grad():
        for p in model.parameters():
            if not p.any():
                p.normal_(0, 0.1)
    x = torch.randn(2, *shape)
    # Each file in a folder of its own: a network over 2 GB keeps its weights in files beside
    # it (ONNX external data), named after the tensors.
    for sub in ("train", "eval"):
        os.makedirs(os.path.join(work, sub))
    train_path = os.path.join(work, "train", "model.onnx")
    eval_path = os.path.join(work, "eval", "model.onnx")
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(4, *shape))
    try:
        export(torch, model, x, train_path, True)
    except Exception as e:  # noqa: BLE001
        if "Bernoulli" not in str(e) and "bernoulli" not in str(e):
            row["import"] = f"no training-mode export: {str(e).splitlines()[0]}"[:200]
            return row
        try:
            # torchvision's StochasticDepth is the identity at p = 0.
            for m in model.modules():
                if type(m).__name__ == "StochasticDepth":
                    m.p = 0.0
            row["note"] = "stochastic depth 0 (Bernoulli does not export)"
            export(torch, model, x, train_path, True)
        except Exception as e2:  # noqa: BLE001
            row["import"] = f"no training-mode export: {str(e2).splitlines()[0] or e2!r}"[:200]
            return row
    export(torch, model, x, eval_path, False)
    # PyTorch's copy of the weights is not needed past the export: loom's import and training
    # of the largest networks (ViT-H/14, 2.5 GB of weights) need the memory.
    del model
    gc.collect()

    x_np = x.numpy().astype(np.float32)
    np.save(os.path.join(work, "x.npy"), x_np)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(eval_path, so, providers=["CPUExecutionProvider"]).run(
        None, {"x": x_np})[0]
    out = os.path.join(work, "loom.npy")
    r = subprocess.run([args.forward, train_path, os.path.join(work, "x.npy"), out,
                        "--classes", str(CLASSES)], capture_output=True, text=True)
    if r.returncode != 0:
        row["import"] = "refused: " + first_line(r.stderr).split(".onnx: ")[-1]
        return row
    row["import"] = "yes"
    got = np.load(out)
    row["forward"] = float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))

    rng = np.random.default_rng(0)
    np.save(os.path.join(work, "tx.npy"), rng.standard_normal((12, *shape), np.float32))
    np.save(os.path.join(work, "ty.npy"), (np.arange(12) % CLASSES).astype(np.int64))
    shard = os.path.join(work, "train.shard")
    r = subprocess.run([args.loom, "data", "convert", os.path.join(work, "tx.npy"), shard,
                        "--labels", os.path.join(work, "ty.npy"), "--classes", str(CLASSES)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        row["train"] = "convert failed: " + first_line(r.stderr)
        return row
    cfg = os.path.join(work, "run.toml")
    with open(cfg, "w") as f:
        f.write(f'model = "{train_path}"\nbatch = 4\nmax_steps = 3\nepochs = 1\nseed = 0\n'
                f'threads = 1\neval = false\n[data]\ntrain_shards = "{shard}"\n'
                f'[optim]\nname = "sgd"\nlr = 0.001\nmomentum = 0.9\n'
                f'[output]\ndir = "{os.path.join(work, "run")}"\n')
    r = subprocess.run([args.loom, "train", cfg], capture_output=True, text=True)
    if r.returncode != 0:
        row["train"] = "failed: " + first_line(r.stderr)
        return row
    epochs = []
    with open(os.path.join(work, "run", "metrics.jsonl")) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("kind") == "epoch":
                epochs.append(rec)
    if len(epochs) != 1 or epochs[0].get("step") != 3 or not np.isfinite(epochs[0]["train_loss"]):
        row["train"] = f"not 3 steps of finite loss: {epochs}"[:200]
        return row
    row["train"] = f"3 steps, loss {epochs[0]['train_loss']:.3f}"

    # The trained network written back by `loom export --onnx`: onnxruntime and loom's import
    # of that file must agree on the same inputs.
    back = os.path.join(work, "back.onnx")
    r = subprocess.run([args.loom, "export", os.path.join(work, "run"), "--onnx", back],
                       capture_output=True, text=True)
    if r.returncode != 0:
        row["export"] = "failed: " + first_line(r.stderr)
        return row
    want = ort.InferenceSession(back, so, providers=["CPUExecutionProvider"]).run(
        None, {"input": x_np})[0]
    r = subprocess.run([args.forward, back, os.path.join(work, "x.npy"), out,
                        "--classes", str(CLASSES)], capture_output=True, text=True)
    if r.returncode != 0:
        row["export"] = "not read back: " + first_line(r.stderr).split(".onnx: ")[-1]
        return row
    got = np.load(out)
    row["export"] = float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))
    return row


def passed(row, tolerance):
    return (row["import"] == "yes" and row["forward"] is not None and
            row["forward"] <= tolerance and row["train"].startswith("3 steps") and
            isinstance(row["export"], float) and row["export"] <= tolerance)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--loom", required=True)
    p.add_argument("--forward", required=True)
    p.add_argument("--models", default=",".join(QUICK))
    p.add_argument("--all", action="store_true", help="every classification model torchvision has")
    p.add_argument("--check", action="store_true")
    p.add_argument("--tolerance", type=float, default=1e-4)
    p.add_argument("--work", default=None)
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    import onnxruntime as ort
    import torch
    import torchvision
    import torchvision.models as models
    torch.set_num_threads(1)
    names = args.models.split(",")
    if args.all:
        names = sorted(models.list_models(module=models)) + TRANSFORMERS
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, "
          f"onnxruntime {ort.__version__}; opset 14; forward tolerance {args.tolerance:g}")
    print(f"{'model':<22} {'params':>11}  {'import':<8} {'forward':>9}  {'train':<20} "
          f"{'export':>9}  note")
    failures = 0
    for name in names:
        with tempfile.TemporaryDirectory(dir=args.work) as work:
            t0 = time.time()
            row = one(args, torch, models, ort, name, work)
        ok = passed(row, args.tolerance)
        failures += not ok
        fwd = "" if row["forward"] is None else f"{row['forward']:.1e}"
        params = "" if row["params"] is None else f"{row['params']:,}"
        imp = row["import"] if row["import"] == "yes" else "no"
        note = row["note"] if row["import"] == "yes" else row["import"]
        if row["import"] == "yes" and not row["train"].startswith("3 steps"):
            note = (note + "; " if note else "") + row["train"]
        export = row["export"]
        if isinstance(export, str):
            note = (note + "; " if note else "") + "export " + export
        export = f"{export:.1e}" if isinstance(export, float) else ""
        print(f"{name:<22} {params:>11}  {imp:<8} {fwd:>9}  "
              f"{row['train'] if row['train'].startswith('3') else '':<20} {export:>9}  "
              f"{note} ({time.time() - t0:.0f} s)", flush=True)
    print(f"{len(names) - failures} of {len(names)} import, agree within "
          f"{args.tolerance:g}, train, and export back to agree within it too")
    return 1 if args.check and failures else 0


if __name__ == "__main__":
    sys.exit(main())
