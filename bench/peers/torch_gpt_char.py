#!/usr/bin/env python3
"""loom's PyTorch peer for gpt-char: the zoo's configs/models/gpt-char.toml and the recipe of
bench/gpt_char.sh (docs/models.md, "gpt-char against PyTorch") written in PyTorch, reading the
same token shards, so the bench compares validation bits/byte and tokens/s in one run.

  python bench/peers/torch_gpt_char.py --train T.shard --valid V.shard --steps 1700 --seed 0
  python bench/peers/torch_gpt_char.py --train T.shard --valid V.shard --steps 40 --threads 1 --no-eval

The network: token embedding [256, 128] plus a learned position table [128, 128] (both
nn.Embedding, N(0, 1)); 4 pre-norm blocks x + attn(ln1(x)), then x + proj(gelu(fc(ln2(x))))
with 4-head causal self-attention and a 512-wide MLP (erf GELU); a final LayerNorm and a Linear
head to 256 logits per position. Every module keeps PyTorch's default initialisation, which is
what loom's layers draw (docs/models.md lists them).

How the attention and the update are written (--style):
  mha   nn.MultiheadAttention under a boolean causal mask and torch.optim.AdamW's default loop;
        what PyTorch 1.13 offers.
  sdpa  what a PyTorch user writes today: one Linear to q, k, v, F.scaled_dot_product_attention
        with is_causal=True, an output Linear (the same parameters and initialisation as
        nn.MultiheadAttention's), and AdamW with fused=True where the CPU build has it
        (foreach otherwise). The default where F.scaled_dot_product_attention exists.
--compile wraps the model in torch.compile (PyTorch 2 and later).

With --world N (one command per rank, --rank R, --master HOST:PORT) the model is trained by
DistributedDataParallel over gloo: every rank draws the same window order and takes its 1/N of
each global batch of --batch windows (N must divide it), so the global batch and recipe are
the single process's. Tokens/s counts the global batch, timed on each rank (DDP keeps them in
step); rank 0 prints the RESULT line, the validation with it. With --optimizer onebit_adam the
model is not wrapped in DDP: loom.torch.OnebitAdam sums the ranks' gradients exactly for its
warm-up and then their momenta through loom's 1-bit codec (the loom package must be importable).

Data, as loom's token windows (docs/data.md, "Token windows"): the shards' token ids; an epoch
is the non-overlapping windows o + i * context, i < floor(tokens / context) - 1, at a random
offset o, in a shuffled order, cut into floor(windows / batch) batches (the last partial batch
dropped); validation is the windows at offset 0, floor((tokens - 1) / context) of them, every
position scored. The window order is drawn from torch's generator, not loom's: the same
distribution of windows, not the same sequence.

Recipe: AdamW (decoupled weight decay on every parameter), cross-entropy per position averaged
over the batch's tokens, learning rate lr * (1 + cos(pi * step / steps)) / 2 multiplied by
(step + 1) / warmup during the first `warmup` steps, where warmup = round(warmup_epochs *
steps_per_epoch) as loom's lr.warmup_epochs gives it.

Tokens/s counts forward, backward and the update only. Prints
  RESULT gpt_char steps=N val_bits_per_byte=B tokens_per_s=R torch=VERSION style=S adamw=U
Exit 3 when PyTorch is missing (scripts/setup-bench installs it), 2 on a shard it can't read.
"""
import argparse
import math
import os
import struct
import sys
import time

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--train", required=True, help="training token shard (loom data convert --text)")
parser.add_argument("--valid", required=True, help="validation token shard")
parser.add_argument("--threads", type=int, default=2)
parser.add_argument("--steps", type=int, default=1700)
parser.add_argument("--batch", type=int, default=32, help="global batch (windows per step)")
parser.add_argument("--context", type=int, default=128)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--warmup-epochs", type=float, default=0.05)
parser.add_argument("--beta1", type=float, default=0.9)
parser.add_argument("--beta2", type=float, default=0.999)
parser.add_argument("--eps", type=float, default=1e-8)
parser.add_argument("--weight-decay", type=float, default=0.01)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--no-eval", action="store_true", help="skip validation (speed runs)")
parser.add_argument("--style", choices=["mha", "sdpa"], default=None,
                    help="how attention and AdamW are written (default: sdpa where it exists)")
parser.add_argument("--compile", action="store_true", help="torch.compile the model")
parser.add_argument("--world", type=int, default=1, help="DDP processes (gloo), one per command")
parser.add_argument("--rank", type=int, default=0, help="this process's rank (with --world)")
parser.add_argument("--master", default="127.0.0.1:29541", help="rank 0's HOST:PORT (with --world)")
parser.add_argument("--optimizer", choices=["adamw", "onebit_adam"], default="adamw",
                    help="adamw: torch.optim.AdamW (under DDP: after DDP's allreduce); onebit_adam: "
                         "loom.torch.OnebitAdam, which exchanges itself (exact for its warm-up, "
                         "then the momentum through loom's 1-bit codec; no DDP)")
parser.add_argument("--optimizer-warmup", type=int, default=None,
                    help="onebit_adam's warmup_steps (default: loom's, 15%% of --steps)")
args = parser.parse_args()
os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
os.environ["OMP_NUM_THREADS"] = str(args.threads)

try:
    import numpy as np
    import torch
    from torch import nn
    import torch.nn.functional as F
except ImportError as e:
    sys.stderr.write(f"torch_gpt_char.py: {e}: run scripts/setup-bench\n")
    sys.exit(3)


def refuse(message):
    sys.stderr.write(f"torch_gpt_char.py: {message}\n")
    sys.exit(2)


def read_token_shard(path):
    """Token ids of a loom token shard (docs/data.md: shard format version 2, target 2)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 152 or raw[:8] != b"LOOMSHRD":
        refuse(f"{path}: not a loom shard")
    version, data_offset, dtype, _ndims, target = struct.unpack_from("<IIBBB", raw, 8)
    if version != 2 or target != 2:
        refuse(f"{path}: not a token shard (version {version}, target {target})")
    vocab, count, record_bytes = struct.unpack_from("<Iqq", raw, 20)
    np_dtype = {1: np.uint8, 3: np.dtype("<u2")}.get(dtype)
    if np_dtype is None or record_bytes != np.dtype(np_dtype).itemsize:
        refuse(f"{path}: token dtype {dtype} with {record_bytes}-byte records")
    if len(raw) != data_offset + count * record_bytes:
        refuse(f"{path}: {len(raw)} bytes, not {data_offset + count * record_bytes}")
    ids = np.frombuffer(raw, dtype=np_dtype, count=count, offset=data_offset).astype(np.int64)
    return torch.from_numpy(ids), vocab


class CausalSelfAttention(nn.Module):
    """nn.MultiheadAttention's parameters and initialisation (xavier-uniform in_proj, zero
    biases, out_proj a Linear with zero bias), computed by F.scaled_dot_product_attention."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        reference = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        with torch.no_grad():
            self.qkv.weight.copy_(reference.in_proj_weight)
            self.qkv.bias.copy_(reference.in_proj_bias)
            self.out.weight.copy_(reference.out_proj.weight)
            self.out.bias.copy_(reference.out_proj.bias)

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class MultiheadAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x, mask):
        return self.attn(x, x, x, attn_mask=mask, need_weights=False)[0]


class Block(nn.Module):
    def __init__(self, dim, heads, hidden, style):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = (CausalSelfAttention if style == "sdpa" else MultiheadAttention)(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, hidden)
        self.proj = nn.Linear(hidden, dim)

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, mask)
        return x + self.proj(F.gelu(self.fc(self.ln2(x))))


class GptChar(nn.Module):
    def __init__(self, style, vocab=256, context=128, dim=128, heads=4, hidden=512, blocks=4):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, hidden, style) for _ in range(blocks))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)
        # True above the diagonal: position i attends to 0..i. A plain attribute, not a buffer:
        # DDP over gloo would broadcast it, and PyTorch 1.13's gloo has no bool broadcast.
        self.mask = torch.triu(torch.ones(context, context, dtype=torch.bool), 1)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.tok(ids) + self.pos.weight[:t]
        mask = self.mask[:t, :t]
        for b in self.blocks:
            x = b(x, mask)
        return self.head(self.ln_f(x))


def windows(tokens, starts, context):
    idx = starts[:, None] + torch.arange(context + 1)[None, :]
    w = tokens[idx]
    return w[:, :-1], w[:, 1:]


@torch.no_grad()
def validation_nats(model, tokens, context, batch=64):
    model.eval()
    n = (len(tokens) - 1) // context
    starts = torch.arange(n) * context
    total, count = 0.0, 0
    for first in range(0, n, batch):
        x, y = windows(tokens, starts[first:first + batch], context)
        logits = model(x)
        total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                                 reduction="sum").item()
        count += y.numel()
    model.train()
    return total / count


def main():
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    train, vocab = read_token_shard(args.train)
    valid, vvocab = read_token_shard(args.valid)
    if vvocab != vocab:
        refuse(f"{args.valid}: vocabulary {vvocab}, the training shard's is {vocab}")
    c = args.context
    have_sdpa = hasattr(F, "scaled_dot_product_attention")
    style = args.style or ("sdpa" if have_sdpa else "mha")
    if style == "sdpa" and not have_sdpa:
        refuse(f"--style sdpa: PyTorch {torch.__version__} has no scaled_dot_product_attention")
    if args.compile and not hasattr(torch, "compile"):
        refuse(f"--compile: PyTorch {torch.__version__} has no torch.compile")
    model = GptChar(style, vocab=vocab, context=c)
    adamw = dict(lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps,
                 weight_decay=args.weight_decay)
    opt, update = None, "loop"
    if style == "sdpa":
        for update in ("fused", "foreach"):
            try:
                opt = torch.optim.AdamW(model.parameters(), **adamw, **{update: True})
                break
            except (RuntimeError, TypeError, ValueError):
                opt = None
    if opt is None:
        opt, update = torch.optim.AdamW(model.parameters(), **adamw), "loop"
    ddp = args.world > 1
    if ddp:
        if args.batch % args.world != 0 or not 0 <= args.rank < args.world:
            refuse(f"--world {args.world}: it must divide --batch {args.batch}, and --rank "
                   f"{args.rank} must be below it")
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"tcp://{args.master}", rank=args.rank,
                                world_size=args.world)
        if args.optimizer == "adamw":  # 1-bit Adam sums the ranks' momenta itself
            model = nn.parallel.DistributedDataParallel(model)
    if args.optimizer == "onebit_adam":  # after the process group: it exchanges through it
        import loom.torch
        warmup_steps = (args.optimizer_warmup if args.optimizer_warmup is not None
                        else max(1, int(0.15 * args.steps)))
        opt = loom.torch.OnebitAdam(model.parameters(), **adamw, warmup_steps=warmup_steps)
        update = f"loom-onebit-adam-w{warmup_steps}"
    share = args.batch // args.world
    forward = torch.compile(model) if args.compile else model
    # A compiled model compiles in its first steps: a one-off cost the rate leaves out.
    untimed = min(3, args.steps - 1) if args.compile else 0
    per_epoch_windows = len(train) // c - 1
    steps_per_epoch = per_epoch_windows // args.batch
    warmup = int(math.floor(args.warmup_epochs * steps_per_epoch + 0.5))
    gen = torch.Generator().manual_seed(args.seed)
    step, seconds, epoch = 0, 0.0, 0
    while step < args.steps:
        offset = int(torch.randint(0, c, (1,), generator=gen))
        order = offset + torch.randperm(per_epoch_windows, generator=gen) * c
        for b in range(steps_per_epoch):
            if step >= args.steps:
                break
            lr = args.lr * 0.5 * (1 + math.cos(math.pi * min(step, args.steps) / args.steps))
            if step < warmup:
                lr *= (step + 1) / warmup
            for group in opt.param_groups:
                group["lr"] = lr
            first = b * args.batch + args.rank * share
            x, y = windows(train, order[first:first + share], c)
            began = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            logits = forward(x)
            loss = F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
            loss.backward()
            opt.step()
            if step >= untimed:
                seconds += time.perf_counter() - began
            step += 1
            if step % 100 == 0:
                print(f"step {step}: loss {loss.item():.4f} ({loss.item() / math.log(2):.4f} bits) "
                      f"lr {lr:.2e}  {(step - untimed) * args.batch * c / max(seconds, 1e-9):.0f} tokens/s", flush=True)
        epoch += 1
    if ddp:
        dist.barrier()
        if args.rank != 0:
            return
        if isinstance(model, nn.parallel.DistributedDataParallel):
            model = model.module
    bits = float("nan") if args.no_eval else validation_nats(model, valid, c) / math.log(2)
    print(f"RESULT gpt_char steps={step} val_bits_per_byte={bits:.4f} "
          f"tokens_per_s={(step - untimed) * args.batch * c / seconds:.1f} torch={torch.__version__} "
          f"style={style}{'+compile' if args.compile else ''} adamw={update}", flush=True)


if __name__ == "__main__":
    main()
