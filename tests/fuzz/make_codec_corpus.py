#!/usr/bin/env python3
"""Writes the seed corpora of the codec harnesses (tests/fuzz/codec_fuzz.cc) under
tests/fuzz/corpus/codec_<name>/ (run once; the files are committed): for each codec a valid
payload of a few shapes, laid out as the harness reads them (parameter byte, n as 16-bit
little-endian, payload), so the fuzzer starts from inputs that decode."""
import os
import struct
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "tests/fuzz/corpus"


def seed(codec, name, param, n, payload):
    d = os.path.join(out, "codec_" + codec)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(bytes([param]) + struct.pack("<H", n) + payload)


def pad4(b):
    return b + b"\0" * (-len(b) % 4)


vals = [0.5, -1.25, 3.0, 0.0, -0.75, 2.5, 1e-3, -4.0, 0.125, 7.0]
seed("fp32", "ten", 0, 10, struct.pack("<10f", *vals))
seed("fp32", "empty", 0, 0, b"")
# fp16 codes of 1.0, -2.0, 0.5 and bf16 codes of the same
seed("fp16", "three", 0, 3, pad4(struct.pack("<3H", 0x3C00, 0xC000, 0x3800)))
seed("bf16", "three", 0, 3, pad4(struct.pack("<3H", 0x3F80, 0xC000, 0x3F00)))
# int8, block 8 (param 0): 2 blocks of absmax, then 10 codes (0x7f is +absmax, 0xff -absmax)
seed("int8", "ten", 0, 10, pad4(struct.pack("<2f", 4.0, 2.5) + bytes([0x7f, 0xff, 0x40, 0, 0x80,
                                                                      0x7f, 0x10, 0x90, 1, 2])))
seed("int8", "block64", 1, 70, pad4(struct.pack("<2f", 1.0, 0.5) + bytes(range(70))))
# onebit, column 32 (param 0): levels per column, then sign words
seed("onebit", "forty", 0, 40, struct.pack("<4f", -0.5, 0.25, -1.0, 2.0) +
     struct.pack("<2I", 0xF0F0F0F0, 0x55))
# topk, fraction 0.1 (param 1): n = 20 -> k = 2 entries (index, value), ascending
seed("topk", "twenty", 1, 20, struct.pack("<IfIf", 3, 1.5, 17, -2.0))
seed("topk", "all", 3, 3, struct.pack("<IfIfIf", 0, 1.0, 1, -1.0, 2, 0.5))
# powersgd, rank 1, cols = ceil(sqrt(n)) (param 0): n = 9 -> P 3x1, Q 3x1
seed("powersgd", "nine", 0, 9, struct.pack("<6f", 0.6, 0.8, 0.0, 1.0, -2.0, 0.5))
# rank 2, cols 7 (param 1 | 2 << 2): n = 14 -> rows 2, rank 2: P 2x2, Q 7x2
seed("powersgd", "fourteen", 1 | 2 << 2, 14, struct.pack("<18f", *([0.5] * 18)))
