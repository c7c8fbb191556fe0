"""Fashion-MNIST for loom's PyTorch peers, loaded as loom loads it: the IDX files of Debian's
dataset-fashion-mnist, pixels scaled to [0, 1] and standardised by the training set's mean and
(unbiased) standard deviation."""
import gzip
import os
import struct
import sys

import numpy as np
import torch


def read_idx(data_dir, stem):
    """An IDX array (big-endian header: 0 0 type ndims, then the dimensions) as numpy uint8."""
    for name in (stem + ".gz", stem):
        path = os.path.join(data_dir, name)
        if os.path.exists(path):
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rb") as f:
                raw = f.read()
            break
    else:
        sys.exit(f"{os.path.join(data_dir, stem)}[.gz] not found "
                 "(apt-get install dataset-fashion-mnist, or --data DIR)")
    if raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        sys.exit(f"{stem}: not an unsigned-byte IDX file")
    ndims = raw[3]
    dims = struct.unpack(">" + "I" * ndims, raw[4:4 + 4 * ndims])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndims).reshape(dims)


def load_standardised(data_dir):
    """(x_train [60000, 784], y_train, x_test [10000, 784], y_test) as float32 / int64 tensors."""
    def images(stem):
        return torch.from_numpy(read_idx(data_dir, stem).reshape(-1, 784) / 255.0).float()

    def labels(stem):
        return torch.from_numpy(read_idx(data_dir, stem).astype(np.int64))

    x_train, x_test = images("train-images-idx3-ubyte"), images("t10k-images-idx3-ubyte")
    mean, std = x_train.mean(), x_train.std()
    return ((x_train - mean) / std, labels("train-labels-idx1-ubyte"), (x_test - mean) / std,
            labels("t10k-labels-idx1-ubyte"))


def accuracy(model, x, y):
    """Test accuracy of `model` on (x, y) in eval mode, 1000 samples at a time."""
    model.eval()
    with torch.no_grad():
        right = sum((model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum().item()
                    for i in range(0, len(x), 1000))
    model.train()
    return right / len(x)
