#!/usr/bin/python3
"""torch_mlp_cosine.py - the shared PyTorch peer (torch_mlp.py) with loom's cosine schedule.

  /usr/bin/python3 bench/peers/torch_mlp_cosine.py PEER_SCRIPT [peer args...]

Runs the peer script unchanged, except that every torch.optim.SGD it creates anneals its
learning rate per step as loom's `lr.schedule = "cosine"` does (src/loom/optim/lr_schedule.cc):
lr_t = lr * (1 + cos(pi * t / T)) / 2 for step t = 0 .. T-1, T = epochs * ceil(60000 / batch).
So the two are compared on the same recipe, schedule included, without copying the peer.
"""
import math
import runpy
import sys

import torch

peer = sys.argv[1]
sys.argv = [peer] + sys.argv[2:]


def arg(name, default):
    if name in sys.argv:
        return type(default)(sys.argv[sys.argv.index(name) + 1])
    return default


TRAIN_SAMPLES = 60000  # Fashion-MNIST's training set, as the peer loads it
total_steps = arg("--epochs", 3) * math.ceil(TRAIN_SAMPLES / arg("--batch", 128))
_Sgd = torch.optim.SGD


class CosineSgd(_Sgd):
    def __init__(self, params, lr, **kw):
        super().__init__(params, lr=lr, **kw)
        self._base_lr, self._t = lr, 0

    def step(self, closure=None):
        t = min(self._t, total_steps)
        for group in self.param_groups:
            group["lr"] = self._base_lr * 0.5 * (1.0 + math.cos(math.pi * t / total_steps))
        self._t += 1
        return super().step(closure)


torch.optim.SGD = CosineSgd
runpy.run_path(peer, run_name="__main__")
