"""loom.torch.comm_hook in DistributedDataParallel (gloo on localhost, 2 and 3 processes): the
averaged gradient every rank gets equals, bit for bit, loom's own compressed_allreduce over its
thread transport on the same gradients (with error-feedback state carried over the steps), and
DDP puts that result into the parameters' gradients. PowerSGD equals it bit for bit at 2
processes and to float rounding at 3 (its factor sums are added in another order). Bad input
raises ValueError with a message."""

import copy
import json
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
# rank 2 so that the model's 16 x 20 weight is compressed, not sent whole
PARAMS = {"powersgd": {"rank": 2}}
CODECS = ["fp16", "bf16", "int8", "onebit", "topk", "powersgd"]
# One run of 2 or 3 processes trains every codec in turn (starting the processes costs more
# than the training) in well under a minute; a hang fails the tests at this deadline.
DEADLINE_S = 150


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# DDP sums the first step in one bucket, then rebuilds its buckets in the order backward made
# the gradients: with these limits (bytes; PyTorch reads the first from
# dist._DEFAULT_FIRST_BUCKET_BYTES) into two, the second layer's (85 floats) and the first's
# (336), so that the hook has two buckets of one step in flight at once.
FIRST_BUCKET_BYTES, BUCKET_BYTES = 256, 420
BUCKETS_AFTER_FIRST_STEP = 2


def _train(rank, world, codecs, port, out_dir):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    dist._DEFAULT_FIRST_BUCKET_BYTES = FIRST_BUCKET_BYTES
    for i, codec in enumerate(codecs):
        _train_codec(rank, world, codec, out_dir, last=i == len(codecs) - 1)


def _train_codec(rank, world, codec, out_dir, last):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5))
    local = copy.deepcopy(model)
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=BUCKET_BYTES / 2**20)
    hook = loom.torch.comm_hook(codec, record=True, **PARAMS.get(codec, {}))
    ddp.register_comm_hook(None, hook)
    gen = torch.Generator().manual_seed(100 + rank)
    grads, local_grads, step_of_call = [], [], []
    for step in range(STEPS):
        x = torch.randn(8, 20, generator=gen)
        ddp(x).pow(2).mean().backward()
        # backward returns once DDP has waited for every bucket's future, and the hook records
        # a bucket before it completes the future
        step_of_call += [step] * (len(hook.calls) - len(step_of_call))
        local(x).pow(2).mean().backward()
        grads.append(np.concatenate([p.grad.numpy().ravel() for p in model.parameters()]))
        local_grads.append(np.concatenate([p.grad.numpy().ravel() for p in local.parameters()]))
        for p in list(model.parameters()) + list(local.parameters()):
            p.grad = None
    # DDP's buckets went through the hook's background thread (CPU buckets, 2+ ranks)
    threaded = hook._thread is not None
    # the bytes of one direct call on a bucket that every codec cuts into equal stripes
    flat = np.arange(6144, dtype=np.float32) * np.float32(1e-3)
    sent = hook.bytes_sent
    hook.allreduce(flat, index=99)
    wire = (hook.bytes_sent - sent, hook._stages[99].wire_bytes)
    np.savez(os.path.join(out_dir, f"{codec}_rank{rank}.npz"),
             index=np.array([c[0] for c in hook.calls]),
             step=np.array(step_of_call),
             **{f"before{k}": c[1] for k, c in enumerate(hook.calls)},
             **{f"after{k}": c[2] for k, c in enumerate(hook.calls)},
             grads=np.stack(grads), local=np.stack(local_grads), wire=np.array(wire),
             flat=flat, matrices=json.dumps([c[3] for c in hook.calls]),
             threaded=np.array(threaded))
    if last:
        # No barrier, and the DDP module (its Reducer holds the process group) is freed after
        # this, at the return, so the group is destroyed there, as in the hang this guards
        # against: the hook must leave no work in gloo's threads (loom/torch.py, allreduce).
        dist.destroy_process_group()


WORLDS = [2, 3]


def spawn(fn, args, nprocs, timeout_s=DEADLINE_S):
    """mp.spawn that fails the test instead of hanging when a process never finishes."""
    ctx = mp.spawn(fn, args=args, nprocs=nprocs, join=False)
    deadline = time.monotonic() + timeout_s
    while not ctx.join(timeout=1):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            pytest.fail(f"{nprocs} processes did not finish within {timeout_s} s")


_RUNS = {}


def ddp_run(world, tmp_path_factory):
    """The folder of the run of `world` processes over every codec (made once per world; a
    failed run fails every test that reads it)."""
    if world not in _RUNS:
        out = tmp_path_factory.mktemp(f"ddp{world}")
        try:
            spawn(_train, (world, CODECS, free_port(), str(out)), world)
            _RUNS[world] = (out, None)
        except BaseException as e:  # pytest.fail, a process's exception
            _RUNS[world] = (out, f"the run of {world} processes failed: {e}")
    out, failure = _RUNS[world]
    if failure:
        pytest.fail(failure)
    return out


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("codec", CODECS)
def test_hook_equals_loom_compressed_allreduce(tmp_path_factory, world, codec):
    out = ddp_run(world, tmp_path_factory)
    runs = [np.load(out / f"{codec}_rank{r}.npz") for r in range(world)]
    c = loom.codecs.get(codec, **PARAMS.get(codec, {}))
    refs = {}
    index = runs[0]["index"]
    # one bucket in the first step, then DDP's rebuilt ones
    assert len(index) == 1 + BUCKETS_AFTER_FIRST_STEP * (STEPS - 1)
    assert sorted(index[1:]) == sorted(list(range(BUCKETS_AFTER_FIRST_STEP)) * (STEPS - 1))
    step = runs[0]["step"]
    assert list(step) == [0] + [s for s in range(1, STEPS)
                                for _ in range(BUCKETS_AFTER_FIRST_STEP)]
    assert all(bool(run["threaded"]) for run in runs)  # the asynchronous path was the one tested
    matrices = [[tuple(m) for m in call] for call in json.loads(str(runs[0]["matrices"]))]
    if codec == "powersgd":
        # the two layers' weights [out, in] and biases [1, out], in the buckets' order
        layers = [(1, 5), (1, 16), (5, 16), (16, 20)]
        assert sorted(matrices[0]) == layers
        assert sorted(m for call in matrices[1:] for m in call) == sorted(layers * (STEPS - 1))
    # loom sums PowerSGD's factors with its allreduce (ring order at 3 ranks), the hook in rank
    # order: equal bits where the order cannot matter (a + b at 2 ranks), float rounding at 3
    exact = codec != "powersgd" or world == 2
    for k in range(len(index)):
        data = [np.array(run[f"before{k}"]) for run in runs]
        n = data[0].size
        # the hook starts a bucket over when DDP rebuilds it to another size or layout
        key = (n, tuple(matrices[k]))
        if refs.get(index[k], (None,))[0] != key:
            refs[index[k]] = (key, loom.torch.reference_allreduce(c, world, n, matrices[k],
                                                                  index[k]))
        refs[index[k]][1].run(data)
        for r, run in enumerate(runs):
            # every rank holds the same bits
            np.testing.assert_array_equal(run[f"after{k}"].view(np.uint32),
                                          runs[0][f"after{k}"].view(np.uint32))
            if exact:
                np.testing.assert_array_equal(run[f"after{k}"].view(np.uint32),
                                              data[r].view(np.uint32),
                                              err_msg=f"rank {r} call {k}")
            else:
                np.testing.assert_allclose(run[f"after{k}"], data[r], rtol=1e-4,
                                           atol=1e-5 * np.abs(data[r]).max(),
                                           err_msg=f"rank {r} call {k}")
    for s in range(STEPS):
        calls = [k for k in range(len(index)) if step[k] == s]
        for r, run in enumerate(runs):
            # what the hook saw is this rank's own gradient over the world size, and what DDP
            # left in .grad is what the hook returned (the buckets hold them in their own order)
            before = np.concatenate([run[f"before{k}"] for k in calls])
            after = np.concatenate([run[f"after{k}"] for k in calls])
            np.testing.assert_array_equal(np.sort(before),
                                          np.sort(run["local"][s] / np.float32(world)))
            np.testing.assert_array_equal(np.sort(run["grads"][s]), np.sort(after))
    for run in runs:
        sent, wire = run["wire"]
        if codec == "powersgd":  # P and Q cut into N parts of L N / j bounds: a few bytes apart
            assert abs(sent - wire) < 8 * world
        else:
            assert sent == wire, f"the hook sent {sent} bytes, loom's allreduce sends {wire}"
    if codec == "powersgd":  # summed over ranks, a ring allreduce's 2 (N-1) times the factors
        assert sum(run["wire"][0] for run in runs) == \
            2 * (world - 1) * c.encoded_bytes(runs[0]["flat"].size)
    # the lossy sum is close to the exact mean
    exact = sum(run["local"][0] for run in runs) / world
    approx = runs[0]["grads"][0]
    assert np.abs(np.sort(approx) - np.sort(exact.astype(np.float32))).max() <= \
        np.abs(exact).max() * (1.0 if codec in ("onebit", "topk", "powersgd") else 0.05)


def test_unsupported_backend_is_value_error(monkeypatch):
    with pytest.raises(ValueError, match="ucc"):
        loom.torch.check_backend("ucc")
    monkeypatch.setattr(dist, "get_backend", lambda group=None: "ucc")
    with pytest.raises(ValueError, match="not supported"):
        loom.torch.comm_hook("fp16")


@pytest.fixture
def one_rank(monkeypatch):
    """A gloo group of one rank, as the hook sees it (no process group is made)."""
    monkeypatch.setattr(dist, "get_backend", lambda group=None: "gloo")
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 1)
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 0)


class FakeBucket:
    """What the hook reads of DDP's GradBucket: the flat buffer, its index, its gradients."""

    def __init__(self, grads, index=0, dtype=torch.float32):
        self.grads = [torch.as_tensor(g, dtype=dtype) for g in grads]
        self.flat = torch.cat([g.reshape(-1) for g in self.grads])

    def buffer(self):
        return self.flat

    def index(self):
        return 0

    def gradients(self):
        out, offset = [], 0
        for g in self.grads:
            out.append(self.flat[offset:offset + g.numel()].view(g.shape))
            offset += g.numel()
        return out


def test_bad_input_is_value_error(one_rank):
    with pytest.raises(ValueError, match="unknown codec"):
        loom.torch.comm_hook("nope")
    with pytest.raises(ValueError, match="unknown parameter"):
        loom.torch.comm_hook("int8", width=3)
    with pytest.raises(ValueError, match="warmup_steps"):
        loom.torch.comm_hook("onebit", warmup_steps=-1)
    hook = loom.torch.comm_hook("int8")
    g = np.linspace(-1, 1, 64, dtype=np.float32)
    with pytest.raises(ValueError, match="float64"):
        hook.allreduce(g.astype(np.float64))
    with pytest.raises(ValueError, match="C-contiguous"):
        hook.allreduce(np.linspace(-1, 1, 128, dtype=np.float32)[::2])
    with pytest.raises(ValueError, match=r"shape \(8, 8\)"):
        hook.allreduce(g.reshape(8, 8).copy())
    with pytest.raises(ValueError, match="NumPy float32 array"):
        hook.allreduce(torch.from_numpy(g))
    with pytest.raises(ValueError, match="float64"):  # a double model's bucket
        hook(None, FakeBucket([g], dtype=torch.float64))
    # a bucket state belongs to one bucket size
    st = loom._loom.Stages(loom.codecs.get("int8")._impl, 64, 1, 0)
    st.encode(g)
    with pytest.raises(ValueError, match="made for 64"):
        st.encode(np.zeros(65, dtype=np.float32))
    psgd = loom.codecs.get("powersgd")
    with pytest.raises(ValueError, match="cover it end to end"):
        loom._loom.Stages(psgd._impl, 64, 1, 0, "b", [(4, 4)])
    with pytest.raises(ValueError, match="positive"):
        loom._loom.Stages(psgd._impl, 0, 1, 0, "b", [(0, 4)])
    with pytest.raises(ValueError, match="matrices are for powersgd"):
        loom._loom.Stages(loom.codecs.get("int8")._impl, 64, 1, 0, "b", [(8, 8)])
    with pytest.raises(ValueError, match="cover it end to end"):
        loom.torch.comm_hook("powersgd").allreduce(g, matrices=[(3, 3)])
    with pytest.raises(ValueError, match="expected auto, stripes or gather"):
        loom.torch.comm_hook("onebit", aggregation="ring")
    with pytest.raises(ValueError, match="topk is summed by gather only"):
        loom.torch.comm_hook("topk", aggregation="stripes")
    with pytest.raises(ValueError, match="powersgd is summed by linear only"):
        loom.torch.comm_hook("powersgd", aggregation="gather")
    with pytest.raises(ValueError, match="expected auto, stripes or gather"):
        loom.torch.reference_allreduce(loom.codecs.get("int8"), 2, 64, aggregation="")


def test_aggregation_auto_is_what_loom_training_does():
    """"auto": 1-bit all-gathers at two ranks (each value quantised once: the sum is the two
    ranks' own decoded encodings) and stripes at three; the other codecs keep their own way;
    stripes can still be asked for."""
    onebit, int8 = loom.codecs.get("onebit"), loom.codecs.get("int8")
    assert loom._loom.Stages(onebit._impl, 64, 2, 0).aggregation == "gather"
    assert loom._loom.Stages(onebit._impl, 64, 3, 0).aggregation == "stripes"
    assert loom._loom.Stages(onebit._impl, 64, 2, 0, "b", [], "stripes").aggregation == "stripes"
    assert loom._loom.Stages(int8._impl, 64, 2, 0).aggregation == "stripes"
    assert loom._loom.Stages(int8._impl, 64, 2, 0, "b", [], "gather").aggregation == "gather"
    assert loom._loom.Stages(loom.codecs.get("topk")._impl, 64, 2, 0).aggregation == "gather"
    rng = np.random.default_rng(3)
    n = 4096
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    once = onebit.decode(onebit.encode(a), n=n)
    once = onebit.decode(onebit.encode(b), out=once, accumulate=True)
    gathered = [a.copy(), b.copy()]
    loom.torch.reference_allreduce(onebit, 2, n).run(gathered)
    np.testing.assert_array_equal(gathered[0], once)
    np.testing.assert_array_equal(gathered[1], once)
    striped = [a.copy(), b.copy()]
    loom.torch.reference_allreduce(onebit, 2, n, aggregation="stripes").run(striped)
    assert np.abs(striped[0] - once).max() > 0  # the owners quantise the sum a second time
    exact = a + b
    assert np.abs(gathered[0] - exact).mean() < np.abs(striped[0] - exact).mean()


def test_hook_on_one_rank_is_loom_allreduce_of_one(one_rank):
    """One rank: no bytes move and the hook's result is loom's compressed_allreduce over one
    thread rank, step after step (error feedback and PowerSGD's warm start carried over);
    PowerSGD sees the bucket's matrices, a weight as [out, prod(rest)] and a bias as [1, c]."""
    rng = np.random.default_rng(7)
    shapes = [(6, 3, 2, 2), (6,), (4, 24), (4,)]
    for codec in ["int8", "onebit", "topk", "powersgd"]:
        hook = loom.torch.comm_hook(codec, record=True)
        ref = None
        for step in range(3):
            grads = [rng.standard_normal(s).astype(np.float32) for s in shapes]
            bucket = FakeBucket(grads)
            mats = loom.torch.bucket_matrices(bucket)
            if codec == "powersgd":
                assert mats == [(6, 12), (1, 6), (4, 24), (1, 4)]
            if ref is None:
                ref = loom.torch.reference_allreduce(
                    hook.codec, 1, bucket.flat.numel(), mats if codec == "powersgd" else ())
            want = bucket.flat.numpy().copy()
            ref.run([want])
            out = hook(None, bucket).wait()
            np.testing.assert_array_equal(out.numpy().view(np.uint32), want.view(np.uint32),
                                          err_msg=f"{codec} step {step}")
        assert hook.bytes_sent == 0


def test_warmup_steps_sum_exactly_then_the_codec_starts_with_zero_residuals(one_rank):
    """warmup_steps = 2: the first two steps leave the bucket exact (one rank: the fp32 sum is
    the bucket itself, where 1-bit would change it); the third is the codec's first encode,
    bit for bit loom's compressed_allreduce started afresh (no residual from the warm-up)."""
    rng = np.random.default_rng(11)
    hook = loom.torch.comm_hook("onebit", warmup_steps=2)
    ref = None
    for step in range(4):
        bucket = FakeBucket([rng.standard_normal(40).astype(np.float32)])
        want = bucket.flat.numpy().copy()
        if step >= 2:
            if ref is None:
                ref = loom.torch.reference_allreduce(hook.codec, 1, bucket.flat.numel())
            ref.run([want])
        before = bucket.flat.numpy().copy()
        out = hook(None, bucket).wait().numpy()
        np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32),
                                      err_msg=f"step {step}")
        assert (step < 2) == np.array_equal(out, before), f"step {step}"
