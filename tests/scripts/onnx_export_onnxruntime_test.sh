#!/usr/bin/env bash
# loom's ONNX export run by onnxruntime: the built-in MLP and CNN, ResNet-20, a graph of every
# image layer type and a transformer block, each trained for a few SGD steps on Fashion-MNIST
# (weights and BatchNorm statistics off their initial values), must give loom's logits on 500
# test images: the same class on every sample and every logit within 1e-4 of the sample's
# largest (tests/python/onnx_export_onnxruntime.py). Skips without libonnx-dev (no helper),
# onnxruntime in .venv, or Fashion-MNIST.
# $1 = the built loom, $2 = loom_onnx_export_sample (tests/tools/), absent without ONNX.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SAMPLE=${2:-}
PY="$ROOT/.venv/bin/python"
if [ -z "$SAMPLE" ]; then
  echo "SKIP: this loom was built without libonnx-dev, so it has no ONNX export"; exit 77
fi
if [ ! -x "$PY" ] || ! "$PY" -c "import numpy, onnxruntime" 2>/dev/null; then
  echo "SKIP: .venv/bin/python has no onnxruntime (run scripts/setup-test-python)"; exit 77
fi
DATA=/usr/share/datasets/fashion-mnist  # loom's default data.dir
if [ ! -e "$DATA/t10k-images-idx3-ubyte.gz" ] && [ ! -e "$DATA/t10k-images-idx3-ubyte" ]; then
  echo "SKIP: no Fashion-MNIST in $DATA (apt-get install dataset-fashion-mnist)"; exit 77
fi
SAMPLE=$(realpath "$SAMPLE")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
fail() { echo "FAIL: $*"; exit 1; }

cp "$HERE/../data/onnx/all_layers.toml" all_layers.toml
cp "$HERE/../data/onnx/attention_block.toml" attention_block.toml

run() {  # name model options...
  local name=$1 model=$2; shift 2
  "$SAMPLE" "$model" "$name" "$@" --data-dir "$DATA" --samples 500 > "$name.log" 2>&1 ||
    { cat "$name.log"; fail "loom_onnx_export_sample $*"; }
  cat "$name.log"
}
run mlp mlp --steps 100 --set 'mlp.hidden=[256, 128]'
run cnn cnn --steps 60 --set 'cnn.channels=[16, 32]' --set cnn.hidden=128
run resnet20 resnet20 --steps 10 --batch 16 --lr 0.05
run all_layers all_layers.toml --steps 60 --batch 32 --lr 0.02
run attention_block attention_block.toml --steps 60 --batch 32 --lr 0.02
"$PY" "$ROOT/tests/python/onnx_export_onnxruntime.py" --tol 1e-4 mlp cnn resnet20 all_layers \
  attention_block ||
  fail "onnxruntime disagrees with loom"
echo "ok"
