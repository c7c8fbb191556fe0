#!/usr/bin/python3
"""Writes the PyTorch reference values of the sequence-model layer tests (tests/data/nn/seq_*.txt).

Run with Debian's python (torch and numpy are visible only to it):
    /usr/bin/python3 tests/nn/make_seq_references.py
CI has no PyTorch; the files it writes are committed. The file format, and the float32 inputs
with float64 computation, are make_layer_references.py's (its Case class writes them).

The layers are PyTorch's own modules, not a transcription of loom's arithmetic:
nn.Embedding, nn.LayerNorm, nn.MultiheadAttention with a causal attn_mask (query = key =
value = x), and F.cross_entropy with ignore_index. The learned position table is checked
against x + P[:time] computed here.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_layer_references import Case, OUT  # noqa: E402

gen = torch.Generator().manual_seed(20261202)


def rand(*shape, lo=-1.0, hi=1.0):
    return lo + (hi - lo) * torch.rand(*shape, generator=gen, dtype=torch.float32)


def embedding(name, batch, time, vocab, dim):
    c = Case(name, f"nn.Embedding({vocab}, {dim}) on [{batch}, {time}] ids")
    c.attr("vocab", vocab)
    c.attr("dim", dim)
    ids = torch.randint(0, vocab, (batch, time), generator=gen)
    ids[0, 1] = ids[1, 2]  # a repeated id: its gradient rows add
    w32 = rand(vocab, dim)
    emb = torch.nn.Embedding(vocab, dim).double()
    with torch.no_grad():
        emb.weight.copy_(w32.double())
    y = emb(ids)
    dy32 = rand(*y.shape)
    y.backward(dy32.double())
    c.tensor("x", ids.to(torch.float32))
    c.tensor("table", w32)
    c.tensor("dy", dy32)
    c.tensor("y", y)
    c.tensor("dtable", emb.weight.grad)
    c.write()


def position(name, batch, time, max_len, dim):
    c = Case(name, f"x + P[:time], P [{max_len}, {dim}], on [{batch}, {time}, {dim}]")
    c.attr("max_len", max_len)
    c.attr("dim", dim)
    x32, p32 = rand(batch, time, dim), rand(max_len, dim)
    x, p = x32.double().requires_grad_(True), p32.double().requires_grad_(True)
    y = x + p[:time]
    dy32 = rand(*y.shape)
    y.backward(dy32.double())
    for key, t in dict(x=x32, table=p32, dy=dy32, y=y, dx=x.grad, dtable=p.grad).items():
        c.tensor(key, t)
    c.write()


def layernorm(name, shape, eps, offset):
    c = Case(name, f"nn.LayerNorm({shape[-1]}, eps={eps}) on {list(shape)}, inputs offset by "
                   f"{offset}")
    c.attr("eps", eps)
    x32 = rand(*shape, lo=-2.0, hi=2.0) + offset
    g32, b32 = rand(shape[-1], lo=0.5, hi=1.5), rand(shape[-1])
    ln = torch.nn.LayerNorm(shape[-1], eps=eps).double()
    with torch.no_grad():
        ln.weight.copy_(g32.double())
        ln.bias.copy_(b32.double())
    x = x32.double().requires_grad_(True)
    y = ln(x)
    dy32 = rand(*y.shape)
    y.backward(dy32.double())
    for key, t in dict(x=x32, gamma=g32, beta=b32, dy=dy32, y=y, dx=x.grad,
                       dgamma=ln.weight.grad, dbeta=ln.bias.grad).items():
        c.tensor(key, t)
    c.write()


def attention(name, batch, time, dim, heads, bias):
    c = Case(name, f"nn.MultiheadAttention({dim}, {heads}, bias={bias}, batch_first=True) "
                   f"self-attention with a causal mask on [{batch}, {time}, {dim}]")
    c.attr("dim", dim)
    c.attr("heads", heads)
    c.attr("bias", bias)
    mha = torch.nn.MultiheadAttention(dim, heads, bias=bias, batch_first=True).double()
    win32, wout32 = rand(3 * dim, dim), rand(dim, dim)
    bin32, bout32 = rand(3 * dim), rand(dim)
    with torch.no_grad():
        mha.in_proj_weight.copy_(win32.double())
        mha.out_proj.weight.copy_(wout32.double())
        if bias:
            mha.in_proj_bias.copy_(bin32.double())
            mha.out_proj.bias.copy_(bout32.double())
    x32 = rand(batch, time, dim, lo=-2.0, hi=2.0)
    x = x32.double().requires_grad_(True)
    mask = torch.triu(torch.ones(time, time, dtype=torch.bool), diagonal=1)  # True: not seen
    y, _ = mha(x, x, x, attn_mask=mask, need_weights=False)
    dy32 = rand(*y.shape)
    y.backward(dy32.double())
    c.tensor("x", x32)
    c.tensor("w_in", win32)
    c.tensor("w_out", wout32)
    if bias:
        c.tensor("b_in", bin32)
        c.tensor("b_out", bout32)
    c.tensor("dy", dy32)
    c.tensor("y", y)
    c.tensor("dx", x.grad)
    c.tensor("dw_in", mha.in_proj_weight.grad)
    c.tensor("dw_out", mha.out_proj.weight.grad)
    if bias:
        c.tensor("db_in", mha.in_proj_bias.grad)
        c.tensor("db_out", mha.out_proj.bias.grad)
    c.write()


def xent_ignore(name, rows, cols, ignore):
    c = Case(name, f"cross_entropy(ignore_index={ignore}) summed and averaged")
    c.attr("ignore_index", ignore)
    z32 = rand(rows, cols, lo=-3.0, hi=3.0)
    labels = torch.randint(0, cols, (rows,), generator=gen)
    labels[1] = ignore
    labels[4] = ignore
    z = z32.double().requires_grad_(True)
    loss = F.cross_entropy(z, labels, reduction="sum", ignore_index=ignore)
    loss.backward()
    mean = F.cross_entropy(z32.double(), labels, reduction="mean", ignore_index=ignore)
    c.tensor("logits", z32)
    c.tensor("labels", labels.double())
    c.tensor("loss", loss.reshape(1))
    c.tensor("mean", mean.reshape(1))
    c.tensor("dlogits", z.grad)
    c.write()


def main():
    os.makedirs(OUT, exist_ok=True)
    embedding("seq_embedding", 2, 5, 7, 4)
    position("seq_position_embedding", 2, 4, 6, 3)
    layernorm("seq_layernorm", (3, 4, 16), 1e-5, 0.0)
    layernorm("seq_layernorm_offset", (2, 3, 24), 1e-5, 300.0)
    attention("seq_attention", 2, 6, 8, 2, True)
    attention("seq_attention_nobias", 2, 5, 12, 4, False)
    xent_ignore("seq_xent_ignore", 7, 6, -1)


if __name__ == "__main__":
    main()
