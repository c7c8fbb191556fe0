#!/usr/bin/env python3
"""Figures bench/gpt_char.sh reports beside the two trainers' losses; numpy only.

  gpt_char_figures.py bigram TRAIN.shard VALID.shard CONTEXT
      bits/byte of a count-based token bigram with add-one smoothing, counted on the training
      shard's tokens, scored on the tokens loom's validation windows predict: the labels of the
      floor((n - 1) / CONTEXT) windows at offset 0 of the validation shard, each from the token
      before it.
  gpt_char_figures.py words TRAIN.txt SAMPLE.txt
      of the words (runs of ASCII letters, compared lower-cased) in SAMPLE.txt, how many occur
      as words of TRAIN.txt: prints "FOUND TOTAL".
"""
import re
import struct
import sys

import numpy as np


def token_ids(path):
    raw = open(path, "rb").read()
    if raw[:8] != b"LOOMSHRD":
        sys.exit(f"gpt_char_figures.py: {path}: not a loom shard")
    version, data_offset, dtype, _ndims, target = struct.unpack_from("<IIBBB", raw, 8)
    vocab, count, record_bytes = struct.unpack_from("<Iqq", raw, 20)
    if version != 2 or target != 2 or dtype not in (1, 3):
        sys.exit(f"gpt_char_figures.py: {path}: not a token shard")
    return np.frombuffer(raw, dtype=np.uint8 if dtype == 1 else np.dtype("<u2"), count=count,
                         offset=data_offset).astype(np.int64), vocab


def bigram(train_path, valid_path, context):
    train, vocab = token_ids(train_path)
    valid, _ = token_ids(valid_path)
    counts = np.ones((vocab, vocab))
    np.add.at(counts, (train[:-1], train[1:]), 1)
    scored = (len(valid) - 1) // context * context
    prev, nxt = valid[:scored], valid[1:scored + 1]
    logp = np.log2(counts[prev, nxt] / counts[prev].sum(axis=1))
    print(f"{-logp.mean():.4f}")


def words(train_txt, sample_txt):
    def of(path):
        return re.findall(r"[a-z]+", open(path, "rb").read().decode("latin-1").lower())
    known = set(of(train_txt))
    sample = of(sample_txt)
    print(sum(w in known for w in sample), len(sample))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "bigram":
        bigram(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif len(sys.argv) == 4 and sys.argv[1] == "words":
        words(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
