#!/usr/bin/env python3
"""loom's codecs from Python against the same codecs timed in C++: GB/s of fp32 input (4 n bytes
per second, as `loom bench codec` counts) for encode (with error feedback, into a preallocated
buffer) and decode, at 4 MiB by default. "C++" times the codec in a C++ loop inside the
extension (no Python between calls); the difference is the bindings' overhead per call.

    .venv/bin/python bench/python_codecs.py [--mib 4] [--iters 50] [--codecs fp16,int8]
"""

import argparse
import time

import numpy as np

import loom
from loom import codecs


def best_of(fn, iters, rounds=3):
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        best = min(best, (time.perf_counter() - t0) / iters)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=4.0, help="bucket size in MiB of fp32")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--codecs", default="fp16,bf16,int8,onebit,topk,powersgd")
    a = ap.parse_args()
    n = int(a.mib * (1 << 20)) // 4
    g = (np.arange(n, dtype=np.float32) % 2003 - 1001) * np.float32(1e-3)
    print(f"loom {loom.__version__} ({loom.git_rev}), {n} floats ({a.mib:g} MiB), GB/s of fp32 input")
    print(f"{'codec':10} {'py encode':>10} {'C++ encode':>11} {'py decode':>10} {'C++ decode':>11}")
    for name in a.codecs.split(","):
        c = codecs.get(name)
        state = c.make_state(n)
        out = np.empty(c.encoded_bytes(n), np.uint8)
        dec = np.empty(n, np.float32)
        c.encode(g, state, out)
        py_enc = best_of(lambda: c.encode(g, state, out), a.iters)
        py_dec = best_of(lambda: c.decode(out, out=dec), a.iters)
        cpp_enc, cpp_dec = min((c._impl.bench(n, a.iters) for _ in range(3)),
                               key=lambda t: t[0] + t[1])
        gb = 4 * n / 1e9
        print(f"{name:10} {gb / py_enc:10.2f} {gb / cpp_enc:11.2f} {gb / py_dec:10.2f} "
              f"{gb / cpp_dec:11.2f}")


if __name__ == "__main__":
    main()
