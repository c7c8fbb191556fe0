#!/usr/bin/env python3
"""loom's PyTorch peer: the default job of `loom train configs/mlp.toml` written in PyTorch, so
`loom bench train` and bench/accuracy.sh compare against it in the same run.

  python bench/peers/torch_mlp.py --threads 1 --epochs 1
  python bench/peers/torch_mlp.py --threads 1 --epochs 3 --schedule cosine --seed 2
  python bench/peers/torch_mlp.py --world 2 --rank R --master 127.0.0.1:29531 --hook int8

With --world N (one command per rank) the model is trained by DistributedDataParallel over gloo,
each rank on its 1/N of every epoch's permutation at --batch per rank; --hook picks how DDP sums
the gradients: none (its own fp32 allreduce), torch-fp16 (PyTorch's fp16_compress_hook) or a
loom codec through loom.torch.comm_hook (fp16, bf16, int8, onebit, topk, powersgd; the loom
package must be importable); --bucket-mb and --first-bucket-mb set DDP's buckets. With
--optimizer onebit_sgd the model is not wrapped in DDP: loom.torch.OnebitSGD sums the ranks'
velocities itself, through loom's 1-bit codec with momentum correction. An epoch's
samples/s is N shards over the slowest rank's time; rank 0 evaluates and prints the lines
below, the RESULT line with its own training loss and accuracy over the last epoch
(bench/netns/ddp_hook.sh runs this).

The recipe is loom's: MLP 784-1024-1024-10 (ReLU, dropout 0.5), cross-entropy, SGD with
momentum 0.9, lr 0.05 (constant, or annealed per step to 0 by cosine as loom's
lr.schedule = "cosine"), batch 128, Fashion-MNIST from the IDX files of Debian's
dataset-fashion-mnist, pixels scaled to [0, 1] and standardised by the training set's mean and
(unbiased) standard deviation.

Samples/s counts the training loop only: batches are sliced from tensors already in memory, and
loading and evaluation are left out. One line per epoch, then
  RESULT ... median_samples_per_s=N final_test_acc=A torch=VERSION
which `loom bench train` parses. Exit 3 when PyTorch is missing (scripts/setup-bench installs it).
"""
import argparse
import math
import os
import statistics
import sys
import time

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--threads", type=int, default=1, help="intra-op threads (and BLAS threads)")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch", type=int, default=128)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--momentum", type=float, default=0.9)
parser.add_argument("--schedule", choices=["constant", "cosine"], default="constant")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--data", default=DEFAULT_DATA, help="folder of the Fashion-MNIST IDX files")
parser.add_argument("--compile", action="store_true",
                    help="torch.compile the model (PyTorch 2 and later; the first epoch compiles)")
parser.add_argument("--world", type=int, default=1, help="DDP processes (gloo), one per command")
parser.add_argument("--rank", type=int, default=0, help="this process's rank (with --world)")
parser.add_argument("--master", default="127.0.0.1:29531", help="rank 0's ADDRESS:PORT")
parser.add_argument("--hook", default="none",
                    help="DDP's gradient sum: none, torch-fp16, or a loom codec (loom.torch)")
parser.add_argument("--hook-warmup", type=int, default=0,
                    help="a loom hook's warmup_steps: the first steps summed exactly in fp32")
parser.add_argument("--optimizer", choices=["sgd", "onebit_sgd"], default="sgd",
                    help="sgd: torch.optim.SGD with momentum (under DDP: after DDP's allreduce); "
                         "onebit_sgd: loom.torch.OnebitSGD, which exchanges the ranks' velocities "
                         "itself through loom's 1-bit codec (the model is not wrapped in DDP)")
parser.add_argument("--optimizer-warmup", type=int, default=None,
                    help="onebit_sgd's warmup_steps (default: loom's for codec = onebit, 1%% of "
                         "the run's steps, at most 10)")
parser.add_argument("--bucket-mb", type=float, default=25.0,
                    help="DDP's bucket_cap_mb (its default 25)")
parser.add_argument("--first-bucket-mb", type=float, default=1.0,
                    help="DDP's first bucket (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES, "
                         "default 1 MiB)")
args = parser.parse_args()

# BLAS pools size themselves when torch is imported; torch.set_num_threads alone leaves
# OpenBLAS's own pool at the machine's core count.
os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
os.environ["OMP_NUM_THREADS"] = str(args.threads)

try:
    import numpy as np
    import torch
    from torch import nn
except ImportError as e:
    sys.stderr.write(f"torch_mlp.py: {e}: PyTorch is not installed; run scripts/setup-bench "
                     "(python3-torch and a .venv that sees it)\n")
    sys.exit(3)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fashion_mnist import accuracy, load_standardised  # noqa: E402  (beside this file)


def main():
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    started = time.perf_counter()
    x_train, y_train, x_test, y_test = load_standardised(args.data)
    load_s = time.perf_counter() - started
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Dropout(0.5),
                          nn.Linear(1024, 1024), nn.ReLU(), nn.Dropout(0.5),
                          nn.Linear(1024, 10))
    ddp = args.world > 1
    if args.optimizer != "sgd" and args.hook != "none":
        sys.exit("torch_mlp.py: --optimizer onebit_sgd exchanges itself; it takes no --hook")
    if ddp:
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"tcp://{args.master}", rank=args.rank,
                                world_size=args.world)
        net = model
    if ddp and args.optimizer == "sgd":
        # read when the DDP module is made: the bucket that closes the backward pass first
        dist._DEFAULT_FIRST_BUCKET_BYTES = int(args.first_bucket_mb * 2**20)
        model = nn.parallel.DistributedDataParallel(net, bucket_cap_mb=args.bucket_mb)
        if args.hook == "torch-fp16":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            model.register_comm_hook(None, default_hooks.fp16_compress_hook)
        elif args.hook != "none":
            import loom.torch
            hook = loom.torch.comm_hook(args.hook, warmup_steps=args.hook_warmup)
            model.register_comm_hook(None, hook)
    if ddp:
        # the epoch times' maxima; kept alive to the end, so that gloo's worker threads never
        # free a tensor made here (loom/torch.py explains the hang that avoids)
        kept = []
    if args.compile:
        # the median over the epochs leaves out the first one's compilation (--epochs 3 or more)
        model = torch.compile(model)
    loss_fn = nn.CrossEntropyLoss()
    steps_per_epoch = math.ceil(len(x_train) // max(args.world, 1) / args.batch)
    total_steps = args.epochs * steps_per_epoch
    if args.optimizer == "onebit_sgd":
        import loom.torch
        warmup = (args.optimizer_warmup if args.optimizer_warmup is not None
                  else min(10, max(1, total_steps // 100)))
        optimizer = loom.torch.OnebitSGD(model.parameters(), lr=args.lr,
                                         momentum=args.momentum, warmup_steps=warmup)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    step = 0
    rates, accs = [], []
    train_loss = train_acc = float("nan")
    for epoch in range(args.epochs):
        order = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(
            1000 * args.seed + epoch))
        if ddp:  # this rank's share of the same permutation on every rank
            share = len(order) // args.world
            order = order[args.rank * share:(args.rank + 1) * share]
            dist.barrier()
        began = time.perf_counter()
        # DDP runs: this rank's training loss and accuracy over the epoch (dropout on), to set
        # a hook's training against fp32 DDP's
        loss_sum = torch.zeros((), dtype=torch.float64)
        right = torch.zeros((), dtype=torch.int64)
        for first in range(0, len(order), args.batch):
            if args.schedule == "cosine":  # loom's lr.schedule = "cosine", per step
                for group in optimizer.param_groups:
                    group["lr"] = args.lr * 0.5 * (1 + math.cos(math.pi * step / total_steps))
            picked = order[first:first + args.batch]
            optimizer.zero_grad(set_to_none=True)
            logits = model(x_train[picked])
            loss = loss_fn(logits, y_train[picked])
            loss.backward()
            if ddp:
                loss_sum += loss.detach() * len(picked)
                right += (logits.detach().argmax(1) == y_train[picked]).sum()
            optimizer.step()
            step += 1
        seconds = time.perf_counter() - began
        if ddp:  # the slowest rank's time; every rank's samples
            kept.append(torch.tensor([seconds], dtype=torch.float64))
            dist.all_reduce(kept[-1], op=dist.ReduceOp.MAX)
            seconds = kept[-1].item()
        rates.append(len(order) * args.world / seconds)
        if ddp:
            train_loss, train_acc = loss_sum.item() / len(order), right.item() / len(order)
        accs.append(accuracy(net if ddp else model, x_test, y_test))
        print(f"epoch {epoch + 1}: {rates[-1]:8.0f} samples/s  train_loop {seconds:6.2f} s  "
              f"last_loss {loss.item():.3f}  test_acc {accs[-1]:.4f}", flush=True)
    print(f"RESULT single {args.threads}thr batch={args.batch} lr={args.lr} "
          f"schedule={args.schedule} "
          f"coretype={os.environ.get('OPENBLAS_CORETYPE', '(unset)')} compiled={int(args.compile)} "
          f"median_samples_per_s={statistics.median(rates):.0f} "
          f"final_test_acc={accs[-1]:.4f} data_load_s={load_s:.2f} torch={torch.__version__}"
          + (f" ddp={args.world} hook={args.hook} optimizer={args.optimizer} bucket_mb={args.bucket_mb:g} "
             f"first_bucket_mb={args.first_bucket_mb:g} rank0_train_loss={train_loss:.4f} "
             f"rank0_train_acc={train_acc:.4f}" if ddp else ""),
          flush=True)
    if ddp:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
