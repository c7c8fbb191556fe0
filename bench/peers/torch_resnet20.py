#!/usr/bin/env python3
"""loom's PyTorch peer for ResNet-20: `loom train configs/resnet20.toml` written in PyTorch, so
bench/resnet20.sh compares accuracy and speed against it in the same run.

  python bench/peers/torch_resnet20.py --threads 1 --max-steps 60      # speed
  python bench/peers/torch_resnet20.py --threads 2 --epochs 5 --seed 0 # accuracy
  python bench/peers/torch_resnet20.py --export-onnx r20.onnx          # for model = "r20.onnx"

The network is configs/models/resnet20.toml: a 3x3 convolution to 16 channels, three stages of
three basic blocks (16, 32, 64 channels; the first block of stages 2 and 3 has stride 2 and a
1x1 convolution + BatchNorm shortcut), global average pooling and a dense layer. The recipe is
configs/resnet20.toml's: SGD, momentum 0.9, weight decay 5e-4 on every parameter, lr 0.1
annealed per step to 0 by cosine, batch 64, cross-entropy with label smoothing 0.1, random
crops after zero padding by 4 and horizontal flips, Fashion-MNIST standardised by the training
set's mean and standard deviation (as torch_mlp.py loads it).

With --world N (one command per rank, --rank R, --master HOST:PORT) the model is trained by
DistributedDataParallel over gloo, each rank on its 1/N of every epoch's permutation at --batch
per rank (loom's `batch` is per worker too), BatchNorm on each rank's own batch as loom's
default; samples/s counts all ranks' samples, timed on each (DDP keeps them in step), and rank
0 prints the RESULT line.

--channels-last keeps activations and weights in NHWC, the layout PyTorch's CPU tuning guide
recommends for convolutions; --compile wraps the model in torch.compile (PyTorch 2 and later),
whose first steps compile and are left out of the rate.

Samples/s counts forward, backward and the update only: the crops and flips of a batch (which
loom's loader makes on another thread) are left out. Prints one line per epoch (or per
--max-steps run), then
  RESULT ... median_samples_per_s=N final_test_acc=A torch=VERSION
Exit 3 when PyTorch is missing (scripts/setup-bench installs it).
"""
import argparse
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (speed)")
parser.add_argument("--batch", type=int, default=64)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--weight-decay", type=float, default=5e-4)
parser.add_argument("--label-smoothing", type=float, default=0.1)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--channels-last", action="store_true", help="NHWC activations and weights")
parser.add_argument("--compile", action="store_true", help="torch.compile the model")
parser.add_argument("--world", type=int, default=1, help="DDP processes (gloo), one per command")
parser.add_argument("--rank", type=int, default=0, help="this process's rank (with --world)")
parser.add_argument("--master", default="127.0.0.1:29551", help="rank 0's HOST:PORT (with --world)")
parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
parser.add_argument("--export-onnx", metavar="PATH",
                    help="write the initialised network as ONNX (training mode: BatchNorm kept) "
                         "for `loom train --set model=PATH`, and exit")
args = parser.parse_args()
os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
os.environ["OMP_NUM_THREADS"] = str(args.threads)

try:
    import numpy as np
    import torch
    from torch import nn
    import torch.nn.functional as F
except ImportError as e:
    sys.stderr.write(f"torch_resnet20.py: {e}: run scripts/setup-bench\n")
    sys.exit(3)

from fashion_mnist import accuracy, load_standardised  # noqa: E402  (beside this file)


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.proj = None
        if stride != 1 or cin != cout:
            self.proj = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (self.proj(x) if self.proj is not None else x))


def resnet20(classes=10):
    layers = [nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for stage, c in enumerate([16, 32, 64]):
        for b in range(3):
            layers.append(Block(cin, c, 2 if (b == 0 and stage > 0) else 1))
            cin = c
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes)]
    return nn.Sequential(*layers)


def augment(x, gen):
    """Random crop after zero padding by 4, and a horizontal flip with probability 1/2."""
    n = x.shape[0]
    padded = F.pad(x, (4, 4, 4, 4))
    di = torch.randint(0, 9, (n,), generator=gen)
    dj = torch.randint(0, 9, (n,), generator=gen)
    flip = torch.rand(n, generator=gen) < 0.5
    out = torch.empty_like(x)
    for k in range(n):
        crop = padded[k, :, di[k]:di[k] + 28, dj[k]:dj[k] + 28]
        out[k] = crop.flip(-1) if flip[k] else crop
    return out


def main():
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    x_train, y_train, x_test, y_test = load_standardised(args.data)
    x_train, x_test = x_train.view(-1, 1, 28, 28), x_test.view(-1, 1, 28, 28)
    model = resnet20()
    if args.export_onnx:
        torch.onnx.export(model, torch.zeros(1, 1, 28, 28), args.export_onnx,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          opset_version=14, input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
        print(f"wrote {args.export_onnx}")
        return
    layout = torch.channels_last if args.channels_last else torch.contiguous_format
    if args.channels_last:
        model = model.to(memory_format=layout)
    if args.compile and not hasattr(torch, "compile"):
        sys.stderr.write(f"torch_resnet20.py: --compile: PyTorch {torch.__version__} has no "
                         "torch.compile\n")
        sys.exit(2)
    ddp = args.world > 1
    if ddp:
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"tcp://{args.master}", rank=args.rank,
                                world_size=args.world)
        model = nn.parallel.DistributedDataParallel(model)
    forward = torch.compile(model) if args.compile else model
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9,
                          weight_decay=args.weight_decay)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    steps_per_epoch = math.ceil(len(x_train) // args.world / args.batch)
    total = args.epochs * steps_per_epoch
    if args.max_steps:
        total = min(total, args.max_steps)
    untimed = min(3, total - 1) if args.compile else 0  # compiling steps, left out of the rate
    gen = torch.Generator().manual_seed(args.seed)
    step, rates, acc = 0, [], float("nan")
    for epoch in range(args.epochs):
        order = torch.randperm(len(x_train), generator=gen)
        if ddp:  # this rank's share of the same permutation on every rank
            share = len(order) // args.world
            order = order[args.rank * share:(args.rank + 1) * share]
        seconds, seen = 0.0, 0
        for first in range(0, len(order), args.batch):
            if step >= total:
                break
            for group in opt.param_groups:
                group["lr"] = args.lr * 0.5 * (1 + math.cos(math.pi * step / total))
            picked = order[first:first + args.batch]
            xb = augment(x_train[picked], gen).contiguous(memory_format=layout)
            began = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(forward(xb), y_train[picked])
            loss.backward()
            opt.step()
            if step >= untimed:
                seconds += time.perf_counter() - began
                seen += len(picked)
            step += 1
        rates.append(args.world * seen / seconds)
        if not args.max_steps:
            acc = accuracy(model, x_test, y_test)
        print(f"epoch {epoch + 1}: {rates[-1]:8.1f} samples/s  train_loop {seconds:7.2f} s  "
              f"last_loss {loss.item():.3f}  test_acc {acc:.4f}", flush=True)
        if step >= total:
            break
    if ddp and args.rank != 0:
        return
    print(f"RESULT resnet20 {args.threads}thr batch={args.batch} steps={step} "
          f"median_samples_per_s={statistics.median(rates):.1f} final_test_acc={acc:.4f} "
          f"torch={torch.__version__}{' channels_last' if args.channels_last else ''}"
          f"{' compiled' if args.compile else ''}", flush=True)


if __name__ == "__main__":
    main()
