#!/usr/bin/env bash
# The ONNX zoo check on its quick list (tests/python/onnx_zoo.py): eleven torchvision
# classification networks (ResNet, MobileNet V2/V3, ShuffleNet V2, MnasNet, SqueezeNet, RegNetY,
# EfficientNet, GoogLeNet, DenseNet, Swin) and four transformers exported from PyTorch in
# training mode must import, give onnxruntime's evaluation forward within 1e-4 relative, train
# 3 steps and export back. Skips without libonnx-dev (no
# helper), or without torch, torchvision and onnxruntime in .venv.
# $1 = the built loom, $2 = loom_onnx_forward (tests/tools/), absent without ONNX.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PY="$ROOT/.venv/bin/python"
if [ -z "${2:-}" ]; then
  echo "SKIP: this loom was built without libonnx-dev, so it has no ONNX import"; exit 77
fi
if [ ! -x "$PY" ] || ! "$PY" -c "import numpy, onnxruntime, torch, torchvision" 2>/dev/null; then
  echo "SKIP: .venv/bin/python lacks torch, torchvision or onnxruntime (scripts/setup-test-python)"
  exit 77
fi
exec "$PY" "$ROOT/tests/python/onnx_zoo.py" --loom "$(realpath "$1")" --forward "$(realpath "$2")" \
  --check
