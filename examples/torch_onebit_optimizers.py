#!/usr/bin/env python3
"""loom's optimizers that do their own exchange, in two PyTorch processes (gloo on localhost):
1-bit Adam on a bare model, and 1-bit SGD with momentum correction on a DistributedDataParallel
model under no_sync(), where DDP's own gradient allreduce is switched off and the optimizer
exchanges instead. Each prints its loss as it trains and the bytes a rank sent.

    .venv/bin/pip install .          # once (docs/python.md)
    .venv/bin/python examples/torch_onebit_optimizers.py [--steps 60]
"""

import argparse
import datetime
import socket


def batch(torch, gen):
    """A regression a small network learns: y = sum of sin(x) over the features."""
    x = torch.randn(64, 32, generator=gen)
    return x, torch.sin(x).sum(dim=1, keepdim=True)


def worker(rank, world, port, steps):
    import torch
    import torch.distributed as dist
    import loom.torch

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    gen = torch.Generator().manual_seed(rank)  # each rank its own data

    # 1. A bare model: no DDP at all. The optimizer exchanges every step (exact for its warm-up,
    #    then 1-bit with error feedback), so the replicas stay equal.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = loom.torch.OnebitAdam(model.parameters(), lr=3e-3, warmup_steps=steps // 5)
    for step in range(steps):
        x, y = batch(torch, gen)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if rank == 0 and step % (steps // 4) == 0:
            print(f"OnebitAdam, bare model, step {step}: loss {loss.item():.4f}")
    if rank == 0:
        print(f"OnebitAdam: rank 0 sent {opt.exchange.bytes_sent:,} bytes in {steps} steps")

    # 2. DDP under no_sync(): backward leaves each rank its own gradient, and 1-bit SGD with
    #    momentum correction sends each rank's velocity through the codec.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = loom.torch.OnebitSGD(ddp.parameters(), lr=0.01, momentum=0.9, warmup_steps=2)
    for step in range(steps):
        x, y = batch(torch, gen)
        opt.zero_grad()
        with ddp.no_sync():
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            loss.backward()
        opt.step()
        if rank == 0 and step % (steps // 4) == 0:
            print(f"OnebitSGD, DDP under no_sync(), step {step}: loss {loss.item():.4f}")
    if rank == 0:
        print(f"OnebitSGD: rank 0 sent {opt.exchange.bytes_sent:,} bytes in {steps} steps")
    dist.destroy_process_group()


def main():
    import torch.multiprocessing as mp

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=60)
    args = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(2, port, max(args.steps, 8)), nprocs=2)


if __name__ == "__main__":
    main()
