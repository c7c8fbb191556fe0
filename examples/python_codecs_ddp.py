#!/usr/bin/env python3
"""loom from Python in one page: a codec with error feedback on a NumPy gradient, then two
processes training a small PyTorch model with DistributedDataParallel whose gradients travel
through loom's int8 codec and compressed allreduce (gloo on localhost).

    .venv/bin/pip install .          # once (docs/python.md)
    .venv/bin/python examples/python_codecs_ddp.py
"""

import datetime
import socket

import numpy as np

import loom


def codec_demo():
    g = np.random.default_rng(0).standard_normal(1 << 16).astype(np.float32)
    codec = loom.codecs.get("int8", block=512)
    state = codec.make_state(g.size, "demo bucket")
    payload = codec.encode(g, state)                     # uint8, ~4x smaller than fp32
    approx = codec.decode(payload, n=g.size)
    print(f"int8: {g.nbytes} -> {payload.nbytes} bytes, max error {np.abs(approx - g).max():.2e}, "
          f"residual kept for the next step: {np.abs(state.residual).max():.2e}")


def worker(rank, world, port):
    import torch
    import torch.distributed as dist
    import loom.torch

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    hook = loom.torch.comm_hook(codec="int8")
    ddp.register_comm_hook(None, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(rank)
    w_true = torch.linspace(-1, 1, 32)
    for step in range(200):
        x = torch.randn(64, 32, generator=gen)
        loss = (ddp(x).squeeze(1) - x @ w_true).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 50 == 49:
            print(f"step {step + 1}: loss {loss.item():.4f}, {hook.bytes_sent} bytes sent so far")
    dist.destroy_process_group()  # no barrier needed: the hook leaves nothing in gloo's threads


if __name__ == "__main__":
    codec_demo()
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(2, port), nprocs=2, join=True)
