"""Optimizers that do their own exchange over plain torch.distributed, as DeepSpeed's 1-bit
optimizers do: for a bare model, or a DistributedDataParallel model under ``no_sync()``, whose
gradients nobody has averaged (docs/python.md).

    opt = loom.torch.OnebitAdam(model.parameters(), lr=1e-3, warmup_steps=100)
    loss.backward()   # this rank's own gradient
    opt.step()        # the exchange through loom's codec, then the update

- ``OnebitAdam``: 1-bit Adam (Tang et al., ICML 2021) as loom's ``optim.name = "onebit_adam"``
  runs it (optim/onebit_adam.h, docs/compress.md): AdamW on the exact mean gradient for
  ``warmup_steps`` steps, then the variance frozen and the momentum exchanged through the codec
  with error feedback: each rank sends ``beta1 m / N + (1 - beta1) g / N`` (g its own mean
  gradient, N ranks), the exchanged sum becomes every rank's momentum, and the parameters move
  by it over the variance as it stood at the freeze, each element's step held within the most
  Adam itself could take (OnebitAdam::adam_step_bound).
- ``OnebitSGD``: SGD with momentum correction (Lin et al., ICLR 2018, "Deep Gradient
  Compression") as loom's ``sync.momentum_correction``: each rank keeps its own velocity
  ``u = mu u + g / N``, sends it through the codec, and the sum is applied as plain SGD (with
  L2 weight decay). A gradient hook cannot do this: the velocity must be the rank's own.

The exchange is loom's compressed allreduce over the process group, bit for bit what
``loom.torch.reference_allreduce`` (loom's C++ over its thread transport) computes on the same
inputs; a warm-up step sums exactly in fp32, added in rank order. The arithmetic is float32
NumPy on the host: parameters must be float32 (on any device; they are copied to the host and
back). ``state_dict()`` holds the step count and the moments (or velocities); the codec's
error-feedback residuals live in the exchange and start at zero after a load.
"""

import math
from typing import Any, Callable, Dict, Iterable, Optional

import numpy as np
import torch

from .torch import CommHook

_F32 = np.float32


class _Exchanging(torch.optim.Optimizer):
    """The flat parameter vector, its exchange and the step count the two optimizers share."""

    _name = "loom optimizer"

    def __init__(self, params: Iterable[Any], defaults: Dict[str, Any], codec: str,
                 process_group: Optional[Any], warmup_steps: int, codec_params: Dict[str, Any],
                 min_warmup: int):
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError(f"loom.torch.{self._name}: one parameter group (its parameters "
                             f"are exchanged as one flat vector), not {len(self.param_groups)}")
        self._params = list(self.param_groups[0]["params"])
        for p in self._params:
            if p.dtype != torch.float32:
                raise ValueError(f"loom.torch.{self._name}: a parameter of {p.dtype}; loom's "
                                 f"codecs take float32 (convert the model with .float())")
        if not isinstance(warmup_steps, int) or isinstance(warmup_steps, bool) or \
                warmup_steps < min_warmup:
            raise ValueError(f"loom.torch.{self._name}: warmup_steps must be an integer >= "
                             f"{min_warmup}, not {warmup_steps!r}")
        self.warmup_steps = warmup_steps
        self.exchange = CommHook(codec, process_group, asynchronous=False, **codec_params)
        self.world = self.exchange.world
        self.n = sum(p.numel() for p in self._params)
        self.steps = 0

    def _shares(self) -> np.ndarray:
        """This rank's gradient over the world size, flat (a parameter without one: zeros)."""
        parts = [(p.grad.detach().reshape(-1).cpu() if p.grad is not None
                  else torch.zeros(p.numel(), dtype=torch.float32)) for p in self._params]
        flat = torch.cat(parts).numpy().astype(_F32, copy=True) if parts else \
            np.zeros(0, dtype=_F32)
        return flat / _F32(self.world)

    def _flat_params(self) -> np.ndarray:
        return torch.cat([p.detach().reshape(-1).cpu() for p in self._params]).numpy() \
            .astype(_F32, copy=True)

    def _set_params(self, flat: np.ndarray) -> None:
        offset = 0
        for p in self._params:
            k = p.numel()
            p.copy_(torch.from_numpy(flat[offset:offset + k]).reshape(p.shape))
            offset += k

    def _sum(self, flat: np.ndarray) -> None:
        """In place: the sum over ranks, exact in the warm-up, through the codec after it."""
        if self.steps <= self.warmup_steps:
            self.exchange.exact_sum(flat)
        else:
            self.exchange.allreduce(flat)

    def _closure_loss(self, closure: Optional[Callable[[], Any]]) -> Any:
        if closure is None:
            return None
        with torch.enable_grad():
            return closure()


def _adam_step_bound(b1: float, b2: float) -> float:
    """The most Adam's bias-corrected m / sqrt(v) can reach (loom's OnebitAdam::adam_step_bound,
    onebit_adam.h, computed in double and rounded to float32 as there)."""
    if b2 <= 0 or b1 * b1 >= b2:
        return float("inf")
    return float(_F32((1 - b1) / math.sqrt((1 - b2) * (1 - b1 * b1 / b2))))


class OnebitAdam(_Exchanging):
    """1-bit Adam over ``process_group`` (default: the default group); see the module's text.
    ``weight_decay`` is decoupled, as AdamW's. ``codec`` and ``codec_params`` as in
    loom.codecs.get (a lossy codec: 1-bit by default). ValueError for a bad argument."""

    _name = "OnebitAdam"

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas=(0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, warmup_steps: int = 100,
                 codec: str = "onebit", process_group: Optional[Any] = None, **codec_params):
        if not lr > 0:
            raise ValueError(f"loom.torch.OnebitAdam: lr must be > 0, not {lr!r}")
        if not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"loom.torch.OnebitAdam: betas must lie in [0, 1), not {betas!r}")
        if not eps > 0 or not weight_decay >= 0:
            raise ValueError("loom.torch.OnebitAdam: eps must be > 0 and weight_decay >= 0")
        if codec == "fp32":
            raise ValueError("loom.torch.OnebitAdam: codec fp32 would be Adam with a frozen "
                             "variance; 1-bit Adam sends its momentum through a lossy codec")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay),
                         codec, process_group, warmup_steps, codec_params, 1)
        self.m = np.zeros(self.n, dtype=_F32)
        self.v = np.zeros(self.n, dtype=_F32)

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        loss = self._closure_loss(closure)
        group = self.param_groups[0]
        lr, eps, wd = _F32(group["lr"]), _F32(group["eps"]), _F32(group["weight_decay"])
        b1, b2 = (_F32(b) for b in group["betas"])
        one = _F32(1)
        self.steps += 1
        t = self.steps
        send = self._shares()
        if t <= self.warmup_steps:
            self._sum(send)  # the exact mean gradient
            self.m = b1 * self.m + (one - b1) * send
            self.v = b2 * self.v + (one - b2) * send * send
            frozen_at = t
        else:
            send = (b1 / _F32(self.world)) * self.m + (one - b1) * send
            self._sum(send)
            self.m = send
            frozen_at = self.warmup_steps
        c1 = one / (one - b1 ** _F32(t))
        c2 = one / (one - b2 ** _F32(frozen_at))
        p = self._flat_params()
        step = (self.m * c1) / (np.sqrt(self.v * c2) + eps)
        if t > self.warmup_steps:  # held within Adam's own bound, as loom's (onebit_adam.h)
            bound = _adam_step_bound(float(b1), float(b2))
            step = np.clip(step, _F32(-bound), _F32(bound))
        p = p * (one - lr * wd) - lr * step
        self._set_params(p.astype(_F32, copy=False))
        return loss

    def state_dict(self) -> Dict[str, Any]:
        d = super().state_dict()
        d["loom"] = {"format_version": 1, "steps": self.steps, "m": torch.from_numpy(self.m),
                     "v": torch.from_numpy(self.v)}
        return d

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        loom_state = _loom_state(state_dict, self._name, ("m", "v"), self.n)
        super().load_state_dict({k: v for k, v in state_dict.items() if k != "loom"})
        self.steps = int(loom_state["steps"])
        self.m = loom_state["m"].numpy().astype(_F32, copy=True)
        self.v = loom_state["v"].numpy().astype(_F32, copy=True)


class OnebitSGD(_Exchanging):
    """SGD with momentum correction over ``process_group``; see the module's text. The
    velocity is each rank's own, the weight decay L2 (added to the exchanged sum), no Nesterov.
    ``warmup_steps`` (0 or more) sum exactly before the codec starts. ValueError for a bad
    argument."""

    _name = "OnebitSGD"

    def __init__(self, params: Iterable[Any], lr: float = 0.05, momentum: float = 0.9,
                 weight_decay: float = 0.0, warmup_steps: int = 0, codec: str = "onebit",
                 process_group: Optional[Any] = None, **codec_params):
        if not lr > 0:
            raise ValueError(f"loom.torch.OnebitSGD: lr must be > 0, not {lr!r}")
        if not 0 < momentum < 1:
            raise ValueError(f"loom.torch.OnebitSGD: momentum must lie in (0, 1): momentum "
                             f"correction sends the velocity, not {momentum!r}")
        if not weight_decay >= 0:
            raise ValueError("loom.torch.OnebitSGD: weight_decay must be >= 0")
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay),
                         codec, process_group, warmup_steps, codec_params, 0)
        self.u = np.zeros(self.n, dtype=_F32)

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        loss = self._closure_loss(closure)
        group = self.param_groups[0]
        lr, mu, wd = _F32(group["lr"]), _F32(group["momentum"]), _F32(group["weight_decay"])
        self.steps += 1
        self.u = mu * self.u + self._shares()
        send = self.u.copy()
        self._sum(send)
        p = self._flat_params()
        p = p - lr * (send + wd * p)
        self._set_params(p.astype(_F32, copy=False))
        return loss

    def state_dict(self) -> Dict[str, Any]:
        d = super().state_dict()
        d["loom"] = {"format_version": 1, "steps": self.steps, "u": torch.from_numpy(self.u)}
        return d

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        loom_state = _loom_state(state_dict, self._name, ("u",), self.n)
        super().load_state_dict({k: v for k, v in state_dict.items() if k != "loom"})
        self.steps = int(loom_state["steps"])
        self.u = loom_state["u"].numpy().astype(_F32, copy=True)


def _loom_state(state_dict: Dict[str, Any], name: str, buffers, n: int) -> Dict[str, Any]:
    """The optimizer's own part of a state dict, checked: ValueError naming what is wrong."""
    s = state_dict.get("loom") if isinstance(state_dict, dict) else None
    if not isinstance(s, dict):
        raise ValueError(f"loom.torch.{name}.load_state_dict: no 'loom' entry (a state dict "
                         f"of another optimizer?)")
    if s.get("format_version") != 1:
        raise ValueError(f"loom.torch.{name}.load_state_dict: format_version "
                         f"{s.get('format_version')!r}; this loom reads 1")
    for b in buffers:
        if b not in s or not isinstance(s[b], torch.Tensor) or s[b].numel() != n:
            raise ValueError(f"loom.torch.{name}.load_state_dict: '{b}' must be a tensor of "
                             f"{n} floats (this optimizer's parameters)")
    return s
