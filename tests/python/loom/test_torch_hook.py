"""loom.torch.comm_hook in DistributedDataParallel (gloo on localhost, 2 and 3 processes): the
averaged gradient every rank gets equals, bit for bit, loom's own compressed_allreduce over its
thread transport on the same gradients (with error-feedback state carried over the steps), and
DDP puts that result into the parameters' gradients."""

import copy
import datetime
import os
import socket
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import loom  # noqa: E402
import loom.torch  # noqa: E402

STEPS = 3


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _train(rank, world, codec, port, out_dir):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5))
    local = copy.deepcopy(model)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    hook = loom.torch.comm_hook(codec, record=True)
    ddp.register_comm_hook(None, hook)
    gen = torch.Generator().manual_seed(100 + rank)
    grads, local_grads = [], []
    for _ in range(STEPS):
        x = torch.randn(8, 20, generator=gen)
        ddp(x).pow(2).mean().backward()
        local(x).pow(2).mean().backward()
        grads.append(np.concatenate([p.grad.numpy().ravel() for p in model.parameters()]))
        local_grads.append(np.concatenate([p.grad.numpy().ravel() for p in local.parameters()]))
        for p in list(model.parameters()) + list(local.parameters()):
            p.grad = None
    # the bytes of one direct call on a bucket that every codec cuts into equal stripes
    flat = np.arange(6144, dtype=np.float32) * np.float32(1e-3)
    sent = hook.bytes_sent
    hook.allreduce(flat, index=99)
    wire = (hook.bytes_sent - sent, hook._stages[99].wire_bytes)
    np.savez(os.path.join(out_dir, f"rank{rank}.npz"),
             index=np.array([c[0] for c in hook.calls]),
             before=np.stack([c[1] for c in hook.calls]),
             after=np.stack([c[2] for c in hook.calls]),
             grads=np.stack(grads), local=np.stack(local_grads), wire=np.array(wire),
             flat=flat)
    # gloo tears a pair down under a peer still finishing its last collective without this
    dist.barrier()
    dist.destroy_process_group()


# 3 processes: opt in with LOOM_TEST_WORLD3=1 (an intermittent hang seen there, docs/python.md)
WORLDS = [2, 3] if os.environ.get("LOOM_TEST_WORLD3") == "1" else [2]


def spawn(fn, args, nprocs, timeout_s=120):
    """mp.spawn that fails the test instead of hanging when a process never finishes."""
    ctx = mp.spawn(fn, args=args, nprocs=nprocs, join=False)
    deadline = time.monotonic() + timeout_s
    while not ctx.join(timeout=1):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            pytest.fail(f"{nprocs} processes did not finish within {timeout_s} s")


# The multi-process runs pass, but now and then (more under load) a run's processes never
# finish (docs/python.md, "Open issues"); until that is found they run where asked for, so
# they cannot hang scripts/test.
needs_ddp = pytest.mark.skipif(os.environ.get("LOOM_TEST_DDP") != "1",
                               reason="set LOOM_TEST_DDP=1 to run the multi-process DDP tests")


@needs_ddp
@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("codec", ["fp16", "bf16", "int8", "onebit", "topk"])
def test_hook_equals_loom_compressed_allreduce(tmp_path, world, codec):
    spawn(_train, (world, codec, free_port(), str(tmp_path)), world)
    runs = [np.load(tmp_path / f"rank{r}.npz") for r in range(world)]
    c = loom.codecs.get(codec)
    refs = {}
    index = runs[0]["index"]
    assert len(index) == STEPS  # one bucket per step
    for k in range(len(index)):
        data = [np.array(run["before"][k]) for run in runs]
        n = data[0].size
        if index[k] not in refs:
            refs[index[k]] = loom.torch.reference_allreduce(c, world, n)
        refs[index[k]].run(data)
        for r, run in enumerate(runs):
            np.testing.assert_array_equal(run["after"][k].view(np.uint32), data[r].view(np.uint32),
                                          err_msg=f"rank {r} step {k}")
            # what the hook saw is this rank's own gradient over the world size, and what DDP
            # left in .grad is what the hook returned (the bucket holds them in its own order)
            np.testing.assert_array_equal(np.sort(run["before"][k]),
                                          np.sort(run["local"][k] / np.float32(world)))
            np.testing.assert_array_equal(np.sort(run["grads"][k]), np.sort(run["after"][k]))
    for run in runs:
        sent, wire = run["wire"]
        assert sent == wire, f"the hook sent {sent} bytes, loom's allreduce sends {wire}"
    # the lossy sum is close to the exact mean
    exact = sum(run["local"][0] for run in runs) / world
    approx = runs[0]["grads"][0]
    assert np.abs(np.sort(approx) - np.sort(exact.astype(np.float32))).max() <= \
        np.abs(exact).max() * (1.0 if codec in ("onebit", "topk") else 0.05)


def test_unsupported_backend_is_value_error(monkeypatch):
    with pytest.raises(ValueError, match="ucc"):
        loom.torch.check_backend("ucc")
    monkeypatch.setattr(dist, "get_backend", lambda group=None: "ucc")
    with pytest.raises(ValueError, match="not supported"):
        loom.torch.comm_hook("fp16")
    with pytest.raises(ValueError, match="low-rank"):
        loom.torch.comm_hook("powersgd")
