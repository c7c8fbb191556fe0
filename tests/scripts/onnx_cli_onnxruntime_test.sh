#!/usr/bin/env bash
# `loom export --onnx` of a trained run, run by onnxruntime on the whole Fashion-MNIST test set:
# the class agrees with loom's on every sample and the logits (`loom predict --raw`) within
# 1e-4 x the sample's largest |logit|. (Export then import giving loom the same forward is
# tests/nn/io/onnx_export_test.cc.) Skips (exit 77) without ONNX in the build or onnxruntime in .venv
# (scripts/setup-test-python). $1 = the built loom.
set -euo pipefail
LOOM=$(realpath "${1:?usage: onnx_cli_onnxruntime_test.sh path/to/loom}"); T=$(mktemp -d)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=$ROOT/.venv/bin/python
trap 'rm -rf "$T"' EXIT
cd "$T"
DATA=/usr/share/datasets/fashion-mnist
fail() { echo "FAIL: $*"; exit 1; }
"$LOOM" --version | grep -q "onnx=yes" || { echo "SKIP: this loom was built without ONNX"; exit 77; }
[ -x "$PY" ] && "$PY" -c "import numpy, onnxruntime" 2>/dev/null ||
  { echo "SKIP: no onnxruntime in .venv (scripts/setup-test-python)"; exit 77; }
images=$(ls $DATA/t10k-images-idx3-ubyte* | head -1)

"$LOOM" train --set model=cnn --set cnn.channels=[8,16] --set cnn.hidden=64 --set max_steps=60 \
  --set progress=none --set output.dir=run > train.log 2>&1 || { cat train.log; fail "training"; }
"$LOOM" export run --onnx model.onnx > export.log 2>&1 || { cat export.log; fail "export --onnx"; }
"$LOOM" predict run --input "$images" --output logits.npy --raw > p.log 2>&1 ||
  { cat p.log; fail "predict --raw"; }
"$LOOM" predict run --input "$images" --output classes.npy > c.log 2>&1 || { cat c.log; fail "predict"; }

"$PY" - "$images" run/model.safetensors <<'PY' || fail "onnxruntime disagrees with loom"
import gzip, json, struct, sys
import numpy as np, onnxruntime as ort
raw = open(sys.argv[1], "rb").read()
if raw[:2] == b"\x1f\x8b":
    raw = gzip.decompress(raw)
n = struct.unpack(">I", raw[4:8])[0]
pixels = np.frombuffer(raw[16:], dtype=np.uint8).reshape(n, 1, 28, 28)
# The run's normalisation, from the model file's metadata (safetensors: u64 length, JSON).
st = open(sys.argv[2], "rb").read()
meta = json.loads(st[8:8 + struct.unpack("<Q", st[:8])[0]])["__metadata__"]
mean, std = np.float32(meta["input_mean"]), np.float32(meta["input_stddev"])
x = ((pixels.astype(np.float32) / np.float32(255) - mean) / std).astype(np.float32)
sess = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
out = sess.run(None, {sess.get_inputs()[0].name: x})[0]
loom = np.load("logits.npy")
classes = np.load("classes.npy")
assert out.shape == loom.shape == (n, 10), (out.shape, loom.shape)
agree = int((out.argmax(1) == classes).sum())
ratio = (np.abs(out - loom).max(1) / np.abs(loom).max(1)).max()
print(f"onnxruntime {ort.__version__}: argmax agrees on {agree}/{n}; worst max|dlogit|/max|logit| {ratio:.2e}")
assert agree == n and ratio <= 1e-4
PY
echo "onnx_cli_onnxruntime_test: ok"
