"""Reads loom's model.safetensors with the safetensors library and compares every tensor, bit for
bit, with a directory of NumPy files that `loom export --npy` wrote from a checkpoint (a path
through loom that never touches its safetensors writer). Then re-saves the tensors with the
library's own writer, so the caller can check that loom reads a file it did not write.

usage: compare_safetensors.py MODEL.safetensors NPY_DIR RESAVED.safetensors [name=d0,d1 ...]
"""
import os
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file


def main():
    model, npy_dir, resaved = sys.argv[1:4]
    expect_shapes = {}
    for arg in sys.argv[4:]:
        name, dims = arg.split("=")
        expect_shapes[name] = tuple(int(d) for d in dims.split(","))

    tensors = load_file(model)
    with safe_open(model, "np") as f:
        meta = f.metadata()
    assert meta.get("format") == "loom.model", meta
    assert meta.get("format_version") == "1", meta
    assert "[[layer]]" in meta.get("graph", ""), meta

    files = {n[:-4] for n in os.listdir(npy_dir) if n.endswith(".npy")}
    assert set(tensors) == files, (sorted(tensors), sorted(files))
    for name, t in tensors.items():
        want = np.load(os.path.join(npy_dir, name + ".npy"))
        assert t.dtype == np.float32, (name, t.dtype)
        assert t.shape == want.shape, (name, t.shape, want.shape)
        assert t.tobytes() == want.tobytes(), f"{name}: values differ"
    for name, shape in expect_shapes.items():
        assert name in tensors, (name, sorted(tensors))
        assert tensors[name].shape == shape, (name, tensors[name].shape, shape)
    # The running variance of a trained BatchNorm is no longer its initial ones.
    for name, t in tensors.items():
        if name.endswith(".running_var"):
            assert not np.all(t == 1.0), f"{name}: still the initial ones"

    save_file(tensors, resaved, metadata=meta)
    print(f"ok: {len(tensors)} tensors, {sum(t.size for t in tensors.values())} floats")


if __name__ == "__main__":
    main()
