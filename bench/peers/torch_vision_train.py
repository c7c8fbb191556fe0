#!/usr/bin/env python3
"""PyTorch's training speed on a torchvision classification network: bench/onnx_zoo_speed.py's
peer for the same network imported into loom from ONNX.

  python bench/peers/torch_vision_train.py --model resnet18 --size 64 --batch 32 --steps 12
                                           [--threads 1] [--compile] [--channels-last]

The network is torchvision's with 10 classes; the data are random 3 x size x size images with
labels 0..9, in memory; each step is forward, cross-entropy, backward and an SGD update (lr
0.01, momentum 0.9): what `loom train` does on the ONNX file. With --compile, the model runs
through torch.compile (its first steps compile); with --channels-last, the model and the images
are in NHWC, the layout PyTorch's CPU tuning guide recommends for convolutions. Samples/s is the median over the steps after
the first two. Prints
  RESULT model=NAME median_samples_per_s=N torch=VERSION compiled=0|1 channels_last=0|1
Exit 3 when PyTorch or torchvision is missing (scripts/setup-bench installs both).
"""
import argparse
import os
import statistics
import sys
import time
import warnings

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--model", required=True)
parser.add_argument("--size", type=int, default=64)
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--compile", action="store_true")
parser.add_argument("--channels-last", action="store_true")
args = parser.parse_args()
os.environ["OMP_NUM_THREADS"] = str(args.threads)
warnings.filterwarnings("ignore")
try:
    import torch
    import torchvision
except ImportError as e:
    print(f"torch_vision_train: {e} (scripts/setup-bench)", file=sys.stderr)
    sys.exit(3)

torch.set_num_threads(args.threads)
torch.manual_seed(0)
kw = {"num_classes": 10}
if args.model in ("googlenet", "inception_v3"):
    kw.update(aux_logits=False, init_weights=True)
model = getattr(torchvision.models, args.model)(**kw).train()
# Stochastic depth off, as in the ONNX file loom trains (torch.onnx cannot export its Bernoulli
# noise in training mode): the same network on both sides.
for m in model.modules():
    if type(m).__name__ == "StochasticDepth":
        m.p = 0.0
layout = torch.channels_last if args.channels_last else torch.contiguous_format
model = model.to(memory_format=layout)
step_model = torch.compile(model) if args.compile else model
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
x = torch.randn(args.batch, 3, args.size, args.size).contiguous(memory_format=layout)
y = torch.arange(args.batch) % 10
times = []
for step in range(args.steps):
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(step_model(x), y)
    loss.backward()
    opt.step()
    times.append(time.perf_counter() - t0)
rates = [args.batch / t for t in times[2:]] or [args.batch / times[-1]]
print(f"RESULT model={args.model} median_samples_per_s={statistics.median(rates):.2f} "
      f"torch={torch.__version__} compiled={int(args.compile)} channels_last={int(args.channels_last)}")
