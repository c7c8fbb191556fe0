#!/usr/bin/python3
"""Writes the PyTorch reference values the nn layer tests compare with (tests/data/nn/*.txt).

Run with Debian's python (torch and numpy are visible only to it):
    /usr/bin/python3 tests/nn/make_layer_references.py
CI has no PyTorch; the files it writes are committed.

Inputs and parameters are float32 values (9 digits: they read back exactly); PyTorch then
computes in float64 (outputs written to 10 digits), so the references are the exact answers
the float32 layers approximate.
Each case: the forward output y for input x, and for a fixed upstream gradient dy the input
gradient dx and the parameter gradients.

File format (text, one file per case):
    loom-layer-reference 1                  version line
    # free text                             comments
    attr <name> <value>                     a scalar setting (kernel sizes, eps, ...)
    tensor <name> <rank> <dims...>          then one line of prod(dims) values, row-major
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "nn")


class Case:
    def __init__(self, name, comment):
        self.name, self.lines = name, ["loom-layer-reference 1", "# " + comment]

    def attr(self, key, value):
        self.lines.append(f"attr {key} {int(value) if isinstance(value, bool) else value}")

    def tensor(self, key, t):
        a = t.detach().cpu().numpy() if torch.is_tensor(t) else np.asarray(t)
        self.lines.append(f"tensor {key} {a.ndim} " + " ".join(str(d) for d in a.shape))
        self.lines.append(" ".join(f"{v:.9g}" if a.dtype == np.float32 else f"{v:.10g}"
                                   for v in a.reshape(-1).tolist()))

    def write(self):
        with open(os.path.join(OUT, self.name + ".txt"), "w") as f:
            f.write("\n".join(self.lines) + "\n")


gen = torch.Generator().manual_seed(20261201)


def rand(*shape, lo=-1.0, hi=1.0):
    """float32 uniform values, then promoted to float64 for the computation."""
    return (lo + (hi - lo) * torch.rand(*shape, generator=gen, dtype=torch.float32))


def leaf(t32):
    return t32.double().requires_grad_(True)


def conv(name, n, cin, h, w, cout, k, s, p, d, g, bias):
    c = Case(name, f"Conv2d {cin}->{cout} kernel {k} stride {s} pad {p} dilation {d} "
                   f"groups {g} bias {bias}")
    for key, v in dict(in_channels=cin, out_channels=cout, kernel_h=k[0], kernel_w=k[1],
                       stride_h=s[0], stride_w=s[1], pad_h=p[0], pad_w=p[1], dilation_h=d[0],
                       dilation_w=d[1], groups=g, bias=bias).items():
        c.attr(key, v)
    x32, w32 = rand(n, cin, h, w), rand(cout, cin // g, k[0], k[1])
    b32 = rand(cout)
    x, wt, b = leaf(x32), leaf(w32), leaf(b32)
    y = F.conv2d(x, wt, b if bias else None, s, p, d, g)
    dy32 = rand(*y.shape)
    y.backward(dy32.double())
    c.tensor("x", x32)
    c.tensor("weight", w32)
    if bias:
        c.tensor("bias", b32)
    c.tensor("dy", dy32)
    c.tensor("y", y)
    c.tensor("dx", x.grad)
    c.tensor("dweight", wt.grad)
    if bias:
        c.tensor("dbias", b.grad)
    c.write()


def pool(name, kind, n, ch, h, w, k, s, p, ceil, include_pad=True):
    c = Case(name, f"{kind} kernel {k} stride {s} pad {p} ceil_mode {ceil} "
                   f"count_include_pad {include_pad}")
    for key, v in dict(kernel_h=k[0], kernel_w=k[1], stride_h=s[0], stride_w=s[1], pad_h=p[0],
                       pad_w=p[1], ceil_mode=ceil, count_include_pad=include_pad).items():
        c.attr(key, v)
    x32 = rand(n, ch, h, w)
    x = leaf(x32)
    if kind == "max":
        y = F.max_pool2d(x, k, s, p, ceil_mode=ceil)
    else:
        y = F.avg_pool2d(x, k, s, p, ceil_mode=ceil, count_include_pad=include_pad)
    dy32 = rand(*y.shape)
    y.backward(dy32.double())
    c.tensor("x", x32)
    c.tensor("dy", dy32)
    c.tensor("y", y)
    c.tensor("dx", x.grad)
    c.write()


def global_avg(name, n, ch, h, w):
    c = Case(name, "GlobalAvgPool2d (adaptive_avg_pool2d to 1x1, flattened)")
    x32 = rand(n, ch, h, w)
    x = leaf(x32)
    y = F.adaptive_avg_pool2d(x, 1).flatten(1)
    dy32 = rand(*y.shape)
    y.backward(dy32.double())
    for key, t in dict(x=x32, dy=dy32, y=y, dx=x.grad).items():
        c.tensor(key, t)
    c.write()


def batchnorm(name, shape, training, eps=1e-5, momentum=0.1, offset=0.0):
    ch = shape[1]
    c = Case(name, f"BatchNorm over {list(shape)} training {training} eps {eps} "
                   f"momentum {momentum}")
    c.attr("channels", ch)
    c.attr("eps", eps)
    c.attr("momentum", momentum)
    c.attr("training", training)
    x32 = rand(*shape, lo=-2.0, hi=2.0) + offset
    g32, b32 = rand(ch, lo=0.5, hi=1.5), rand(ch)
    rm32, rv32 = rand(ch, lo=-0.5, hi=0.5), rand(ch, lo=0.5, hi=2.0)
    x, g, b = leaf(x32), leaf(g32), leaf(b32)
    rm, rv = rm32.double().clone(), rv32.double().clone()
    y = F.batch_norm(x, rm, rv, g, b, training=training, momentum=momentum, eps=eps)
    dy32 = rand(*y.shape)
    y.backward(dy32.double())
    for key, t in dict(x=x32, gamma=g32, beta=b32, running_mean_in=rm32, running_var_in=rv32,
                       dy=dy32, y=y, dx=x.grad, dgamma=g.grad, dbeta=b.grad, running_mean=rm,
                       running_var=rv).items():
        c.tensor(key, t)
    c.write()


def activation(name, fn, slope=None):
    c = Case(name, f"activation {name}")
    if slope is not None:
        c.attr("slope", slope)
    x32 = rand(3, 40, lo=-5.0, hi=5.0)
    x = leaf(x32)
    y = fn(x)
    dy32 = rand(*y.shape)
    y.backward(dy32.double())
    for key, t in dict(x=x32, dy=dy32, y=y, dx=x.grad).items():
        c.tensor(key, t)
    c.write()


def xent(name, rows, cols, smoothing):
    c = Case(name, f"cross_entropy(reduction='sum', label_smoothing={smoothing})")
    c.attr("label_smoothing", smoothing)
    z32 = rand(rows, cols, lo=-3.0, hi=3.0)
    labels = torch.randint(0, cols, (rows,), generator=gen)
    z = leaf(z32)
    loss = F.cross_entropy(z, labels, reduction="sum", label_smoothing=smoothing)
    loss.backward()
    c.tensor("logits", z32)
    c.tensor("labels", labels.double())
    c.tensor("loss", loss.reshape(1))
    c.tensor("dlogits", z.grad)
    c.write()


def main():
    os.makedirs(OUT, exist_ok=True)
    conv("conv2d_rect", 2, 3, 7, 6, 4, (3, 2), (2, 1), (1, 0), (1, 1), 1, True)
    conv("conv2d_dilated", 2, 2, 6, 7, 4, (3, 3), (1, 2), (2, 1), (2, 1), 1, True)
    conv("conv2d_groups", 2, 4, 7, 7, 6, (3, 3), (2, 2), (1, 1), (1, 1), 2, True)
    conv("conv2d_depthwise_nobias", 2, 3, 5, 5, 3, (3, 3), (1, 1), (1, 1), (1, 1), 3, False)
    conv("conv2d_square", 2, 2, 6, 6, 3, (5, 5), (1, 1), (2, 2), (1, 1), 1, True)
    pool("maxpool_pad", "max", 2, 3, 7, 6, (3, 3), (2, 2), (1, 1), False)
    pool("maxpool_ceil", "max", 2, 2, 8, 7, (3, 2), (2, 2), (1, 0), True)
    pool("avgpool_pad", "avg", 2, 2, 7, 6, (3, 3), (2, 2), (1, 1), False, True)
    pool("avgpool_ceil_exclude_pad", "avg", 2, 2, 8, 7, (3, 3), (2, 2), (1, 1), True, False)
    pool("avgpool_ceil_include_pad", "avg", 1, 2, 5, 6, (2, 3), (2, 2), (1, 1), True, True)
    global_avg("global_avgpool", 2, 3, 4, 5)
    batchnorm("batchnorm1d_train", (6, 4), True)
    batchnorm("batchnorm1d_len_train", (4, 3, 5), True, eps=1e-3, momentum=0.3)
    batchnorm("batchnorm2d_train", (3, 4, 5, 6), True, offset=3.0)
    batchnorm("batchnorm2d_eval", (3, 4, 5, 6), False)
    activation("leaky_relu", lambda x: F.leaky_relu(x, 0.2), slope=0.2)
    activation("gelu", F.gelu)
    activation("silu", F.silu)
    activation("tanh", torch.tanh)
    activation("sigmoid", torch.sigmoid)
    xent("xent_smoothing", 6, 7, 0.1)
    xent("xent_smoothing_large", 4, 10, 0.6)


if __name__ == "__main__":
    main()
