"""Runs loom's ONNX exports in onnxruntime and compares with loom's own logits.

Each DIR holds model.onnx, x.npy (the inputs) and logits.npy (loom's forward in evaluation), as
tests/tools/onnx_export_sample.cc writes them. For every sample the two must pick the same class
and differ by at most TOL * max|logit of that sample| (loom's) in every logit. Prints, per model,
the worst ratio max|delta| / max|logit| and the accuracy both reach; exits 1 on any failure.

usage: onnx_export_onnxruntime.py [--tol 1e-4] DIR...
"""
import argparse
import os
import sys

import numpy as np
import onnxruntime as ort


def check(folder, tol):
    model = os.path.join(folder, "model.onnx")
    x = np.load(os.path.join(folder, "x.npy"))
    want = np.load(os.path.join(folder, "logits.npy"))
    labels_path = os.path.join(folder, "labels.npy")
    labels = np.load(labels_path) if os.path.exists(labels_path) else None
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    inputs = session.get_inputs()
    outputs = session.get_outputs()
    problems = []
    if [i.name for i in inputs] != ["input"] or [o.name for o in outputs] != ["logits"]:
        problems.append(f"inputs {[i.name for i in inputs]}, outputs {[o.name for o in outputs]}")
    # The free batch axis: run in two uneven batches.
    half = len(x) // 2 + 1
    got = np.concatenate([session.run(["logits"], {"input": x[:half]})[0],
                          session.run(["logits"], {"input": x[half:]})[0]])
    if got.shape != want.shape:
        problems.append(f"onnxruntime gives {got.shape}, loom {want.shape}")
        return problems, None
    got = got.reshape(len(x), -1).astype(np.float64)
    ref = want.reshape(len(x), -1).astype(np.float64)
    scale = np.abs(ref).max(axis=1)
    ratio = np.abs(got - ref).max(axis=1) / np.maximum(scale, 1e-30)
    worst = int(ratio.argmax())
    disagree = np.flatnonzero(got.argmax(axis=1) != ref.argmax(axis=1))
    if len(disagree):
        problems.append(f"argmax differs on {len(disagree)} of {len(x)} samples "
                        f"(first: sample {disagree[0]})")
    if ratio[worst] > tol:
        problems.append(f"sample {worst}: max|delta| / max|logit| = {ratio[worst]:.3g} > {tol:g}")
    acc = ""
    if labels is not None:
        acc = (f", accuracy loom {np.mean(ref.argmax(axis=1) == labels):.4f} "
               f"onnxruntime {np.mean(got.argmax(axis=1) == labels):.4f}")
    line = (f"{folder}: {len(x)} samples, argmax agrees on {len(x) - len(disagree)}, "
            f"worst max|delta|/max|logit| {ratio[worst]:.3g} (sample {worst}), "
            f"median {np.median(ratio):.3g}{acc}")
    return problems, line


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("dirs", nargs="+")
    a = p.parse_args()
    print(f"onnxruntime {ort.__version__}")
    failed = False
    for d in a.dirs:
        problems, line = check(d, a.tol)
        if line:
            print(line)
        for prob in problems:
            print(f"FAIL {d}: {prob}")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
