#!/usr/bin/python3
"""Writes the ONNX fixtures of tests/nn/io/onnx_import_test.cc into tests/data/onnx/.

Run with Debian's Python and PyTorch 1.13 (/usr/bin/python3 tests/nn/make_onnx_fixtures.py
[NAME ...], only the fixtures named if any are);
CI has no PyTorch and reads the committed files. Every model but mlp_eval is exported with
training=TrainingMode.TRAINING and do_constant_folding=False, so BatchNormalization and Dropout
stay in the graph (an eval-mode export folds BatchNorm into Conv and drops Dropout), at opset 14.
mlp_eval is the MLP exported with torch.onnx.export's defaults (eval mode, constant folding, a
fixed batch size of 4 written into its Reshape).

For each model NAME: NAME.onnx and NAME.ref, a text file of lines `key count v1 v2 ...`:
  input   the per-sample input shape, then `x`: a fixed batch of inputs
  eval    PyTorch's output on x in eval mode (running statistics, no dropout)
  train   PyTorch's output on x in train mode (batch statistics), for models without dropout
The running statistics are made non-trivial by a few train-mode steps before the export.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "onnx")
BATCH = 4


class Mlp(nn.Module):
    """Gemm (transB = 1 and, through addmm, 0), MatMul + Add, ReLU, Dropout and the
    Shape/Gather/Unsqueeze/Concat/Reshape chain of x.reshape(x.size(0), -1)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.drop = nn.Dropout(0.25)
        self.w2 = nn.Parameter(torch.randn(32, 16) * 0.2)
        self.b2 = nn.Parameter(torch.randn(16) * 0.1)
        self.w3 = nn.Parameter(torch.randn(16, 10) * 0.2)
        self.b3 = nn.Parameter(torch.randn(10) * 0.1)

    def forward(self, x):
        x = x.reshape(x.size(0), -1)
        x = self.drop(F.relu(self.fc1(x)))
        x = F.relu(torch.matmul(x, self.w2) + self.b2)
        return torch.addmm(self.b3, x, self.w3)


class ConvNet(nn.Module):
    """Only what the layer factory had first: Conv (square, with bias) + ReLU + MaxPool twice,
    view as flatten, Linear."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 6, 3, padding=1)
        self.fc = nn.Linear(6 * 2 * 2, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.view(x.size(0), -1))


class Cnn(nn.Module):
    """Conv (no bias) + BatchNorm2d + ReLU + MaxPool, Conv + ReLU + AveragePool, view as
    flatten, Linear + BatchNorm1d + ReLU + Linear."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 8, 3, padding=1)
        self.fc1 = nn.Linear(8 * 2 * 2, 16)
        self.bn2 = nn.BatchNorm1d(16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.avg_pool2d(F.relu(self.conv2(x)), 2)
        x = x.view(x.size(0), -1)
        return self.fc2(F.relu(self.bn2(self.fc1(x))))


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (x if self.short is None else self.short(x)))


class ResNet(nn.Module):
    """A stem and two residual blocks (identity and strided 1x1 shortcuts), global average
    pooling, flatten, Linear."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU())
        self.block1 = Block(8, 8, 1)
        self.block2 = Block(8, 16, 2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.block2(self.block1(self.stem(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


class Ops(nn.Module):
    """The remaining ops: grouped and dilated Conv, LeakyReLU, SiLU, GELU (erf form), Tanh,
    Sigmoid, Concat of two branches, MaxPool with padding and ceil_mode, AveragePool with
    padding (count_include_pad = false), nn.Flatten."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(2, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=2, dilation=2, groups=2)
        self.conv3 = nn.Conv2d(4, 4, (1, 3), padding=(0, 1))
        self.flat = nn.Flatten()
        self.fc = nn.Linear(8 * 5 * 5, 10)

    def forward(self, x):
        x = F.leaky_relu(self.conv1(x), 0.1)
        a = F.silu(self.conv2(x))
        b = torch.tanh(F.gelu(self.conv3(x)))
        x = torch.sigmoid(torch.cat([a, b], 1))
        x = F.max_pool2d(x, 3, 2, padding=1, ceil_mode=True)
        x = F.avg_pool2d(x, 3, 1, padding=1, count_include_pad=False)
        return self.fc(self.flat(x))


class Mobile(nn.Module):
    """MobileNets' activations: ReLU6 (Clip), Hardswish and Hardsigmoid, after a depthwise Conv;
    the weights are scaled up so that every piece of each is reached."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.conv3 = nn.Conv2d(4, 4, 1)
        with torch.no_grad():
            for c in (self.conv1, self.conv2, self.conv3):
                c.weight.mul_(6)
        self.fc = nn.Linear(4 * 8 * 8, 10)

    def forward(self, x):
        x = F.relu6(self.conv1(x))
        x = F.hardswish(self.conv2(x))
        x = F.hardsigmoid(self.conv3(x))
        return self.fc(torch.flatten(x, 1))


class Shuffle(nn.Module):
    """The layout ops of ShuffleNet and the gates of squeeze-and-excitation: chunk (Slice) and
    split (Split), the channel shuffle (Reshape, Transpose, Reshape, their shapes computed by
    Shape, Gather, Div, Unsqueeze and Concat), ReduceMean over the plane (with and without
    keepdim), GlobalAveragePool, sigmoid and hardsigmoid gates times the activation, and a
    product of two activations of one shape."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.branch = nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.bn = nn.BatchNorm2d(4)
        self.se1 = nn.Conv2d(8, 2, 1)
        self.se2 = nn.Conv2d(2, 8, 1)
        self.gate1 = nn.Conv2d(8, 4, 1)
        self.gate2 = nn.Conv2d(4, 8, 1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        a, b = x.chunk(2, dim=1)
        x = torch.cat((a, F.relu(self.bn(self.branch(b)))), dim=1)
        n, c, h, w = x.size()
        x = x.view(n, 2, c // 2, h, w).transpose(1, 2).contiguous().view(n, -1, h, w)
        p, q = torch.split(x, [3, 5], dim=1)
        x = torch.cat((q, p), dim=1)
        x = x * torch.sigmoid(self.se2(F.relu(self.se1(x.mean((2, 3), keepdim=True)))))
        x = x * F.hardsigmoid(self.gate2(F.relu(self.gate1(F.adaptive_avg_pool2d(x, 1)))))
        x = x * torch.tanh(x)
        return self.fc(x.mean((2, 3)))


class GptBlock(nn.Module):
    def __init__(self, d, heads, t):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)
        self.register_buffer("mask", torch.tril(torch.ones(t, t)).view(1, 1, t, t))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (c // self.heads) ** 0.5)
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class Gpt(nn.Module):
    """A small GPT written as people write one (nanoGPT's attention, op by op): nn.Linear on
    [batch, positions, features] (Transpose + MatMul + Add), a learned position table, nn.LayerNorm
    (decomposed at opset 14, LayerNormalization at 17), the causal mask by masked_fill (Where),
    softmax, GELU, and the last position's logits (Gather)."""

    def __init__(self, features=4, d=16, heads=2, t=8):
        super().__init__()
        self.inp = nn.Linear(features, d)
        self.pos = nn.Parameter(torch.randn(1, t, d) * 0.5)
        self.blocks = nn.Sequential(GptBlock(d, heads, t), GptBlock(d, heads, t))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, 10)
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.LayerNorm):
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        x = self.ln(self.blocks(self.inp(x) + self.pos))
        return self.head(x[:, -1])


class Encoder(nn.Module):
    """nn.TransformerEncoder (batch_first) as people use it: nn.MultiheadAttention inside moves
    the batch axis ([batch, T, E] -> [T, batch, E] -> [T, batch * heads, d] ->
    [batch * heads, T, d]) with sizes computed from Shape, splits q, k and v by Slice, and
    projects by Gemm on [T * batch, E]. One post-norm block with ReLU, one pre-norm block with
    GELU, dropout in both."""

    def __init__(self, features=4, d=16, heads=2):
        super().__init__()
        self.inp = nn.Linear(features, d)
        post = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.1, batch_first=True)
        self.enc = nn.TransformerEncoder(post, 1)
        self.pre = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.1, batch_first=True,
                                              norm_first=True, activation="gelu")
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        return self.head(self.pre(self.enc(self.inp(x)))[:, 0])


class MhaBlock(nn.Module):
    def __init__(self, d, heads, t):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.register_buffer("mask", torch.triu(torch.ones(t, t, dtype=torch.bool), 1))

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=self.mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GptMha(nn.Module):
    """A small GPT written with nn.MultiheadAttention and a causal bool attn_mask, which PyTorch
    turns into an additive -inf mask (Where of constants, then baddbmm's Mul by 1 and Add)."""

    def __init__(self, features=4, d=16, heads=2, t=8):
        super().__init__()
        self.inp = nn.Linear(features, d)
        self.pos = nn.Parameter(torch.randn(1, t, d) * 0.5)
        self.blocks = nn.Sequential(MhaBlock(d, heads, t), MhaBlock(d, heads, t))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        return self.head(self.ln(self.blocks(self.inp(x) + self.pos))[:, -1])


class MhaPool(nn.Module):
    """nn.MultiheadAttention called as most code does (need_weights left on, the weights
    dropped) and the mean over the positions, a sequence classifier's pooling (ReduceMean over
    axis 1)."""

    def __init__(self, features=4, d=16, heads=4):
        super().__init__()
        self.inp = nn.Linear(features, d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        h = self.inp(x)
        out, _ = self.attn(h, h, h)
        return self.head(out.mean(dim=1))


class EinsumAttention(nn.Module):
    """Attention written with torch.einsum on [batch, T, heads, d] (no transposes), as some code
    writes it: "bqhd,bkhd->bhqk" and "bhqk,bkhd->bqhd" (ONNX's Einsum)."""

    def __init__(self, features=4, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.inp = nn.Linear(features, d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        b, t, _ = x.shape
        h = self.inp(x)
        d = h.shape[-1]
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads) for z in self.qkv(h).split(d, 2))
        att = torch.einsum("bqhd,bkhd->bhqk", q, k) * (d // self.heads) ** -0.5
        y = torch.einsum("bhqk,bkhd->bqhd", att.softmax(-1), v).reshape(b, t, d)
        return self.head(self.proj(y)[:, -1])


def vit():
    """torchvision's VisionTransformer, small: the patch Conv, the class token (Expand of a
    parameter to the batch, then Concat), the position table, nn.MultiheadAttention blocks and
    the first position's head. Its zero-initialised head and class token get random values, so
    the check compares more than zeros."""
    from torchvision.models.vision_transformer import VisionTransformer
    model = VisionTransformer(image_size=16, patch_size=4, num_layers=2, num_heads=2,
                              hidden_dim=16, mlp_dim=32, num_classes=10)
    with torch.no_grad():
        for p in model.parameters():
            if not p.any():
                p.normal_(0, 0.5)
    return model


def maxvit():
    """torchvision's MaxVit, small (16 x 16 images, two stages, 2 x 2 windows and grids): its
    window attention multiplies by Einsum and adds a relative position bias gathered from a
    learned table by a constant index; the last stage has a single window (axes of size 1)."""
    from torchvision.models.maxvit import MaxVit
    return MaxVit(input_size=(16, 16), stem_channels=8, partition_size=2, block_channels=[8, 16],
                  block_layers=[1, 1], head_dim=4, stochastic_depth_prob=0.0, num_classes=10)


def swin():
    """torchvision's SwinTransformer, small (16 x 16 images, patches of 2, two stages, 4 x 4
    windows): its shifted-window mask (ConstantOfShape, Range, ScatterND, Mod, Slice and
    comparisons on constants, folded at import into a fixed_bias layer), the roll of the map
    (Slice and Concat), the relative position bias, and the patch merging's every other row and
    column (Slice with step 2). The second stage's map is one window: no shift, no mask."""
    from torchvision.models.swin_transformer import SwinTransformer
    return SwinTransformer(patch_size=[2, 2], embed_dim=8, depths=[2, 2], num_heads=[2, 4],
                           window_size=[4, 4], stochastic_depth_prob=0.0, num_classes=10)


def swin_pad():
    """The small Swin on 18 x 18 images: its 9 x 9 map is padded to whole 4 x 4 windows (Pad of
    the channels-last map, then x[:, :H, :W, :], a Slice of two axes), the mask is built for
    the padded map, and the patch merging pads the odd map to 10 x 10 first."""
    return swin()


class ConvNextBlock(nn.Module):
    """ConvNeXt's block as torchvision writes it: a depthwise 7x7 Conv, a permute to
    channels-last, nn.LayerNorm and two nn.Linear over the channels of [batch, H, W, C] (MatMul on
    four axes), GELU, a permute back, the layer scale (Mul by a [C, 1, 1] parameter) and the
    residual Add."""

    def __init__(self, c=8):
        super().__init__()
        self.stem = nn.Conv2d(1, c, 3, padding=1)
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.ln = nn.LayerNorm(c)
        self.fc1 = nn.Linear(c, 4 * c)
        self.fc2 = nn.Linear(4 * c, c)
        self.scale = nn.Parameter(torch.rand(c, 1, 1) + 0.5)
        self.head = nn.Linear(c, 10)

    def forward(self, x):
        x = self.stem(x)
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.fc2(F.gelu(self.fc1(self.ln(y)))).permute(0, 3, 1, 2)
        x = x + self.scale * y
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class Softplus(nn.Module):
    """An op loom has no layer for."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc(F.softplus(torch.flatten(x, 1)))


def fmt(values):
    values = [float(v) for v in values]
    return " ".join(repr(v) for v in values)


def export(name, model, shape, train_ref, training=True, opset=14):
    x = torch.randn(BATCH, *shape)
    # Running statistics away from their initial 0 and 1, and BatchNorm affine parameters
    # away from 1 and 0, so the import of each is checked.
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn(BATCH, *shape) * 2 + 0.5)
    path = os.path.join(OUT, name + ".onnx")
    if training:
        torch.onnx.export(model, x, path, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, opset_version=opset, input_names=["x"],
                          output_names=["logits"],
                          dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
    else:
        # torch.onnx.export's defaults: eval mode, constant folding, the batch size fixed.
        model.eval()
        torch.onnx.export(model, x, path)
    lines = [f"input {len(shape)} {' '.join(str(d) for d in shape)}",
             f"x {x.numel()} {fmt(x.flatten())}"]
    model.eval()
    with torch.no_grad():
        y = model(x)
    lines.append(f"eval {y.numel()} {fmt(y.flatten())}")
    if train_ref:
        # A copy, so computing it leaves the running statistics as exported.
        import copy
        m = copy.deepcopy(model).train()
        with torch.no_grad():
            y = m(x)
        lines.append(f"train {y.numel()} {fmt(y.flatten())}")
    with open(os.path.join(OUT, name + ".ref"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{path}: {os.path.getsize(path)} bytes")


def main():
    os.makedirs(OUT, exist_ok=True)
    only = set(sys.argv[1:])  # names to write; all of them when none is given
    if only:
        global export
        write = export
        export = lambda name, *a, **k: write(name, *a, **k) if name in only else None  # noqa: E731
    torch.manual_seed(1)
    export("mlp", Mlp(), (1, 8, 8), train_ref=False)
    torch.manual_seed(1)
    export("mlp_eval", Mlp(), (1, 8, 8), train_ref=False, training=False)
    torch.manual_seed(6)
    export("convnet", ConvNet(), (1, 8, 8), train_ref=True)
    torch.manual_seed(2)
    export("cnn", Cnn(), (1, 8, 8), train_ref=True)
    torch.manual_seed(3)
    export("resnet", ResNet(), (3, 8, 8), train_ref=True)
    torch.manual_seed(4)
    export("ops", Ops(), (2, 8, 8), train_ref=True)
    torch.manual_seed(5)
    export("softplus", Softplus(), (1, 8, 8), train_ref=False)
    torch.manual_seed(7)
    export("mobile", Mobile(), (1, 8, 8), train_ref=False)
    torch.manual_seed(8)
    export("shuffle", Shuffle(), (1, 8, 8), train_ref=True)
    torch.manual_seed(9)
    export("gpt", Gpt(), (8, 4), train_ref=True)
    torch.manual_seed(9)
    export("gpt17", Gpt(), (8, 4), train_ref=True, opset=17)
    torch.manual_seed(10)
    export("convnext", ConvNextBlock(), (1, 8, 8), train_ref=True)
    torch.manual_seed(11)
    export("encoder", Encoder(), (8, 4), train_ref=False)
    torch.manual_seed(12)
    export("gpt_mha", GptMha(), (8, 4), train_ref=True)
    torch.manual_seed(13)
    export("vit", vit(), (3, 16, 16), train_ref=False)
    torch.manual_seed(14)
    export("mha_pool", MhaPool(), (8, 4), train_ref=True)
    torch.manual_seed(15)
    export("einsum", EinsumAttention(), (8, 4), train_ref=True)
    torch.manual_seed(16)
    export("maxvit", maxvit(), (3, 16, 16), train_ref=True)
    torch.manual_seed(17)
    export("swin", swin(), (3, 16, 16), train_ref=True)
    torch.manual_seed(18)
    export("swin_pad", swin_pad(), (3, 18, 18), train_ref=True)


if __name__ == "__main__":
    sys.exit(main())
