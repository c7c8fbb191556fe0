#!/usr/bin/env bash
# model.safetensors as the outside world reads it: the Python safetensors library loads the file
# a run wrote, and every tensor equals, bit for bit, what `loom export --npy` writes from the
# run's last checkpoint (train.ckpt: no safetensors code on that path), with PyTorch's names and
# shapes. loom then reads back the file the library re-saves. Skips (77) without the test
# Python (scripts/setup-test-python). $1 = the built loom.
set -euo pipefail
LOOM=$(realpath "${1:?usage: safetensors_numpy_test.sh path/to/loom}")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY="$ROOT/.venv/bin/python"
if [ ! -x "$PY" ] || ! "$PY" -c "import numpy, safetensors.numpy" 2>/dev/null; then
  echo "SKIP: no .venv with numpy and safetensors (run scripts/setup-test-python)"
  exit 77
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
fail() { echo "FAIL: $*"; exit 1; }

# A residual graph with BatchNorm (trained running statistics) and a dense head: the one the
# C++ tests train (tests/common/tiny_residual.toml).
cp "$(dirname "$(realpath "$0")")/../common/tiny_residual.toml" net.toml
"$LOOM" train --set model=net.toml --set workers=2 --set batch=32 --set max_steps=10 \
  --set train.checkpoint_every=5 --set eval=false --set progress=none --set output.dir=run \
  > train.log 2>&1 || { cat train.log; fail "training"; }
[ -f run/model.safetensors ] || fail "the run wrote no model.safetensors"
"$LOOM" export run/checkpoints/step-000000000010 --npy npy > export.log 2>&1 ||
  { cat export.log; fail "export --npy"; }
"$PY" "$ROOT/tests/python/compare_safetensors.py" run/model.safetensors npy resaved.safetensors \
  conv2d_0.weight=4,1,3,3 conv2d_0.bias=4 batchnorm2d_1.running_mean=4 linear_0.weight=32,784 linear_1.weight=10,32 \
  > compare.log 2>&1 || { cat compare.log; fail "safetensors' reading differs from loom's values"; }
cat compare.log

# The library's own file (its header layout and order) loads in loom to the same values.
"$LOOM" export resaved.safetensors --npy npy2 > export2.log 2>&1 ||
  { cat export2.log; fail "loom does not read the file safetensors wrote"; }
for f in npy/*.npy; do
  cmp -s "$f" "npy2/$(basename "$f")" || fail "$(basename "$f") differs after the round trip"
done
# A file without loom's metadata is refused naming the file and what it lacks.
"$PY" -c "
import numpy as np
from safetensors.numpy import save_file
save_file({'w': np.ones((2, 2), np.float32)}, 'foreign.safetensors')"
rc=0; "$LOOM" export foreign.safetensors --npy npy3 > foreign.log 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q 'foreign.safetensors: no "format_version" in the metadata' foreign.log ||
  { cat foreign.log; fail "a foreign file (rc $rc)"; }
echo "ok"
