"""Reads a run's tb/ folder with TensorBoard's own reader (EventAccumulator, which also drops
what a resumed run's SessionLog START supersedes) and checks it against the run's files:
every number of every metrics.jsonl line with a "step" is the scalar "<kind>/<field>" at that
step, within float32 rounding, with nothing more; the last "config" text is config.toml; the
weight and gradient histograms cover every parameter tensor at the expected steps.

usage: check_tensorboard.py RUN_DIR EVENT_FILES HISTOGRAM_EVERY LAST_STEP MISSING_STEP
  EVENT_FILES: how many event files tb/ must hold (one per run of `loom train`)
  MISSING_STEP: the step a resume restarted from (its histograms are superseded), or 0
"""
import json
import math
import os
import struct
import sys

from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
from tensorboard.util import tensor_util


def check_framing(path):
    """Every record's two CRCs, as TensorFlow's reader checks them (it stops at a bad one)."""
    data = open(path, "rb").read()
    at, n = 0, 0
    while at < len(data):
        (length,) = struct.unpack_from("<Q", data, at)
        (len_crc,) = struct.unpack_from("<I", data, at + 8)
        assert len_crc == masked_crc32c(data[at : at + 8]), f"{path}: record {n}: length CRC"
        payload = data[at + 12 : at + 12 + length]
        assert len(payload) == length, f"{path}: record {n} cut short"
        (data_crc,) = struct.unpack_from("<I", data, at + 12 + length)
        assert data_crc == masked_crc32c(payload), f"{path}: record {n}: data CRC"
        at += 16 + length
        n += 1
    return n


def close(a, b):
    return a == b or abs(a - b) <= 1e-6 * max(abs(a), abs(b))


def main():
    run, files_expected, every, last_step, missing_step = sys.argv[1:6]
    every, last_step, missing_step = int(every), int(last_step), int(missing_step)
    tb = os.path.join(run, "tb")
    files = sorted(os.listdir(tb))
    assert len(files) == int(files_expected), files
    for f in files:
        assert f.startswith("events.out.tfevents."), f
        assert check_framing(os.path.join(tb, f)) > 1, f

    acc = ea.EventAccumulator(
        tb, size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0, ea.TENSORS: 0}
    )
    acc.Reload()
    tags = acc.Tags()

    # What metrics.jsonl says, (tag, step) -> value.
    want = {}
    with open(os.path.join(run, "metrics.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            if "step" not in j:
                continue
            for k, v in j.items():
                if k in ("step", "format_version") or isinstance(v, bool):
                    continue
                if isinstance(v, (int, float)):
                    want[(f"{j.get('kind', 'epoch')}/{k}", j["step"])] = float(v)
    got = {}
    for tag in tags["scalars"]:
        for e in acc.Scalars(tag):
            assert (tag, e.step) not in got, f"{tag} twice at step {e.step}"
            got[(tag, e.step)] = e.value
    assert set(got) == set(want), (
        f"only in TensorBoard: {sorted(set(got) - set(want))[:10]}, "
        f"only in metrics.jsonl: {sorted(set(want) - set(got))[:10]}"
    )
    for key, v in want.items():
        assert close(got[key], v) or (math.isnan(v) and math.isnan(got[key])), (key, got[key], v)
    for tag in ("epoch/train_loss", "epoch/val_acc", "epoch/val_loss", "epoch/samples_per_s",
                "epoch/exposed_comm_s", "epoch/loader_wait_s", "epoch/bytes_sent",
                "step/train_loss", "step/lr", "step/samples_per_s"):
        assert tag in tags["scalars"], (tag, tags["scalars"])
    assert max(s for _, s in got) == last_step, max(s for _, s in got)

    # The config, as the text plugin shows it: config.toml in a Markdown code block.
    texts = acc.Tensors("config")
    shown = tensor_util.make_ndarray(texts[-1].tensor_proto).item().decode()
    unindented = "".join(l[4:] if l.startswith("    ") else l for l in shown.splitlines(True))
    assert unindented == open(os.path.join(run, "config.toml")).read(), shown

    # Histograms of every weight tensor and its gradient, every `every` steps.
    hist_tags = tags["histograms"]
    weights = sorted(t[len("weights/"):] for t in hist_tags if t.startswith("weights/"))
    grads = sorted(t[len("gradients/"):] for t in hist_tags if t.startswith("gradients/"))
    assert weights and weights == grads, (weights, grads)
    assert "linear_0.weight" in weights and "linear_0.bias" in weights, weights
    steps_want = [s for s in range(every, last_step + 1, every) if s != missing_step]
    for t in hist_tags:
        events = acc.Histograms(t)
        assert [e.step for e in events] == steps_want, (t, [e.step for e in events])
        for e in events:
            h = e.histogram_value
            assert h.num > 0 and h.min <= h.max and sum(h.bucket) == h.num, (t, e.step)

    print(f"ok: {len(files)} event files, {len(got)} scalars in {len(tags['scalars'])} tags, "
          f"{len(hist_tags)} histogram tags at steps {steps_want}")


if __name__ == "__main__":
    main()
