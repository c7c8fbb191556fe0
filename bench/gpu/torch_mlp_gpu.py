#!/usr/bin/env python3
"""torch_mlp_gpu.py - the PyTorch peer of loom_gpu_bench's MLP figure, on the same GPU.

MLP 784-1024-1024-10 (ReLU, dropout 0.5), SGD momentum 0.9, lr 0.05, batch 1024, synthetic
data already on the device (4 batches, cycled), eager mode. Prints a table line and one JSON
line per configuration:
  sync=none  - the loop never waits for the GPU (PyTorch's best case: the host runs ahead);
  sync=loss  - loss.item() every step, as loom's loop does (it reads the loss back each step).
  python3 bench/gpu/torch_mlp_gpu.py [--batch 1024] [--steps 200] [--tf32]
"""
import argparse
import json
import time

import torch
import torch.nn as nn

ap = argparse.ArgumentParser()
ap.add_argument("--batch", type=int, default=1024)
ap.add_argument("--warmup", type=int, default=20)
ap.add_argument("--steps", type=int, default=200)
ap.add_argument("--tf32", action="store_true", help="allow TF32 matmuls (default fp32)")
args = ap.parse_args()

if not torch.cuda.is_available():
    print("torch_mlp_gpu: skipped: torch sees no GPU")
    raise SystemExit(0)
torch.backends.cuda.matmul.allow_tf32 = args.tf32
dev = torch.device("cuda")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Dropout(0.5),
                      nn.Linear(1024, 1024), nn.ReLU(), nn.Dropout(0.5),
                      nn.Linear(1024, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()
xs = torch.randn(4, args.batch, 784, device=dev)
ys = torch.randint(0, 10, (4, args.batch), device=dev)
precision = "tf32" if args.tf32 else "fp32"


def run(steps, sync_loss):
    last = None
    for s in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xs[s % 4]), ys[s % 4])
        loss.backward()
        opt.step()
        last = loss.item() if sync_loss else loss
    return float(last)


for sync_loss in (False, True):
    run(args.warmup, sync_loss)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    final = run(args.steps, sync_loss)
    torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    rate = args.batch * args.steps / secs
    sync = "loss" if sync_loss else "none"
    print(f"  torch mlp train samples/s (batch {args.batch}, {precision}, sync={sync}) {rate:12.2f}")
    print(json.dumps({"bench": "gpu", "framework": "torch", "metric": "mlp train samples/s",
                      "value": rate, "unit": "samples/s", "batch": args.batch,
                      "precision": precision, "sync": sync, "steps": args.steps,
                      "step_ms": secs / args.steps * 1e3, "final_loss": final,
                      "torch": torch.__version__, "device": torch.cuda.get_device_name()}))
