"""loom.torch.OnebitAdam and OnebitSGD on a bare model over gloo (2 and 3 processes on
localhost): every exchange after the warm-up is, bit for bit, loom's own compressed_allreduce
over its thread transport (loom.torch.reference_allreduce) of what the ranks sent, a warm-up
exchange is the exact sum in rank order, every rank ends with the same parameters, and the
warm-up is PyTorch's own AdamW / SGD with momentum on the mean gradient (to float rounding).
Bad arguments raise ValueError."""

import datetime
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import loom  # noqa: E402
import loom.torch  # noqa: E402

from test_torch_hook import free_port, spawn  # noqa: E402

STEPS, WARMUP = 6, 2
LR = {"adam": 0.01, "sgd": 0.05}


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5))


def _optimizer(kind, model):
    if kind == "adam":
        return loom.torch.OnebitAdam(model.parameters(), lr=LR["adam"], weight_decay=0.01,
                                     warmup_steps=WARMUP)
    return loom.torch.OnebitSGD(model.parameters(), lr=LR["sgd"], momentum=0.9,
                                warmup_steps=WARMUP)


def _train(rank, world, port, out_dir):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    for kind in ("adam", "sgd"):
        model = _model()
        opt = _optimizer(kind, model)
        sends, sums, grads = [], [], []
        exchange = opt.exchange
        allreduce, exact_sum = exchange.allreduce, exchange.exact_sum

        def recorded(fn):
            def call(flat, index=0):
                sends.append(flat.copy())
                fn(flat, index)
                sums.append(flat.copy())
            return call

        exchange.allreduce, exchange.exact_sum = recorded(allreduce), recorded(exact_sum)
        gen = torch.Generator().manual_seed(100 + rank)
        for _ in range(STEPS):
            x = torch.randn(8, 20, generator=gen)
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            grads.append(np.concatenate([p.grad.numpy().ravel() for p in model.parameters()]))
            opt.step()
        params = np.concatenate([p.detach().numpy().ravel() for p in model.parameters()])
        np.savez(os.path.join(out_dir, f"{kind}_rank{rank}.npz"), sends=np.stack(sends),
                 sums=np.stack(sums), grads=np.stack(grads), params=params,
                 bytes_sent=np.array(exchange.bytes_sent))
    dist.destroy_process_group()


_RUNS = {}


def run_of(world, tmp_path_factory):
    if world not in _RUNS:
        out = tmp_path_factory.mktemp(f"opt{world}")
        spawn(_train, (world, free_port(), str(out)), world)
        _RUNS[world] = out
    return _RUNS[world]


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("kind", ["adam", "sgd"])
def test_the_exchange_is_loom_compressed_allreduce(tmp_path_factory, world, kind):
    out = run_of(world, tmp_path_factory)
    runs = [np.load(out / f"{kind}_rank{r}.npz") for r in range(world)]
    n = runs[0]["sends"].shape[1]
    ref = loom.torch.reference_allreduce(loom.codecs.get("onebit"), world, n)
    for step in range(STEPS):
        sends = [run["sends"][step].copy() for run in runs]
        if step < WARMUP:  # exact, in rank order
            want = sends[0].copy()
            for s in sends[1:]:
                want += s
            sends = [want.copy() for _ in range(world)]
        else:
            ref.run(sends)
        for r, run in enumerate(runs):
            np.testing.assert_array_equal(run["sums"][step].view(np.uint32),
                                          sends[r].view(np.uint32),
                                          err_msg=f"{kind}, rank {r}, step {step}")
    for run in runs:  # the replicas agree bit for bit
        np.testing.assert_array_equal(run["params"].view(np.uint32),
                                      runs[0]["params"].view(np.uint32))
    # after the warm-up the codec's bytes: far fewer than an fp32 exchange's 2 (N-1)/N x 4 n
    fp32 = 2 * (world - 1) * 4 * n // world
    assert runs[0]["bytes_sent"] < WARMUP * fp32 + (STEPS - WARMUP) * fp32 / 8


@pytest.fixture
def one_rank(tmp_path):
    """A process group of this process alone (the optimizers' exchange then moves nothing)."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0,
                            world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("kind", ["adam", "sgd"])
def test_the_warm_up_is_pytorchs_own_optimizer(tmp_path_factory, one_rank, world, kind):
    """Through the warm-up the exchange is exact, so the parameters are PyTorch's AdamW (SGD
    with momentum) on the mean gradient: replayed here from the recorded gradients."""
    out = run_of(world, tmp_path_factory)
    runs = [np.load(out / f"{kind}_rank{r}.npz") for r in range(world)]
    model = _model()
    torch_opt = (torch.optim.AdamW(model.parameters(), lr=LR["adam"], weight_decay=0.01)
                 if kind == "adam" else
                 torch.optim.SGD(model.parameters(), lr=LR["sgd"], momentum=0.9))
    ours = _model()
    opt = _optimizer(kind, ours)  # a world of one: its exchange moves nothing
    for step in range(WARMUP):
        mean = sum(run["grads"][step] for run in runs) / np.float32(world)
        for m in (model, ours):
            offset = 0
            for p in m.parameters():
                k = p.numel()
                p.grad = torch.from_numpy(mean[offset:offset + k].copy()).reshape(p.shape)
                offset += k
        torch_opt.step()
        opt.step()
    want = np.concatenate([p.detach().numpy().ravel() for p in model.parameters()])
    got = np.concatenate([p.detach().numpy().ravel() for p in ours.parameters()])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_bad_arguments_are_value_errors(one_rank):
    params = list(_model().parameters())
    with pytest.raises(ValueError, match="warmup_steps must be an integer >= 1"):
        loom.torch.OnebitAdam(params, warmup_steps=0)
    with pytest.raises(ValueError, match="frozen"):
        loom.torch.OnebitAdam(params, codec="fp32")
    with pytest.raises(ValueError, match="betas"):
        loom.torch.OnebitAdam(params, betas=(1.0, 0.999))
    with pytest.raises(ValueError, match="momentum must lie in"):
        loom.torch.OnebitSGD(params, momentum=0.0)
    with pytest.raises(ValueError, match="float32"):
        loom.torch.OnebitSGD([torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))])
    with pytest.raises(ValueError, match="one parameter group"):
        loom.torch.OnebitSGD([{"params": params[:1]}, {"params": params[1:]}])
    # the exchange takes the hook's aggregation: refused by name where the codec can't be summed so
    with pytest.raises(ValueError, match="expected auto, stripes or gather"):
        loom.torch.OnebitSGD(params, aggregation="ring")
    with pytest.raises(ValueError, match="topk is summed by gather only"):
        loom.torch.OnebitAdam(params, codec="topk", aggregation="stripes")
    assert loom.torch.OnebitSGD(params, aggregation="stripes").exchange.aggregation == "stripes"
    opt = loom.torch.OnebitAdam(params, warmup_steps=3)
    state = opt.state_dict()
    assert state["loom"]["format_version"] == 1
    opt.load_state_dict(state)  # round trip
    with pytest.raises(ValueError, match="no 'loom' entry"):
        opt.load_state_dict(torch.optim.AdamW(params).state_dict())
