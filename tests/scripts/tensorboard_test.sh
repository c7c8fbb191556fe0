#!/usr/bin/env bash
# The TensorBoard curves as TensorBoard reads them: a two-worker run stopped at max_steps in its
# second epoch, then resumed from its last checkpoint to a later max_steps, leaves two event
# files in run/tb/, and the tensorboard package's EventAccumulator finds in them every number of
# metrics.jsonl at its step, the config, and the weight and gradient histograms
# (tests/python/check_tensorboard.py). Skips (77) without the test Python
# (scripts/setup-test-python). $1 = the built loom.
set -euo pipefail
LOOM=$(realpath "${1:?usage: tensorboard_test.sh path/to/loom}")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY="$ROOT/.venv/bin/python"
if [ ! -x "$PY" ] || ! "$PY" -c "from tensorboard.backend.event_processing import event_accumulator" 2>/dev/null; then
  echo "SKIP: no .venv with tensorboard (run scripts/setup-test-python)"
  exit 77
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
fail() { echo "FAIL: $*"; exit 1; }

# 54000 training samples after the validation split, a global batch of 2048: 26 steps an epoch.
ARGS=(--set mlp.hidden=[32] --set workers=2 --set batch=1024 --set epochs=3
  --set data.validation=0.1 --set train.log_every=5 --set train.histograms=true
  --set train.histogram_every=10 --set train.checkpoint_every=20 --set progress=none)
"$LOOM" train "${ARGS[@]}" --set max_steps=40 --set output.dir=run > first.log 2>&1 ||
  { cat first.log; fail "training"; }
[ "$(ls run/tb | wc -l)" = 1 ] || fail "tb/ holds $(ls run/tb) after one run"
"$PY" "$ROOT/tests/python/check_tensorboard.py" run 1 10 40 0 > check1.log 2>&1 ||
  { cat check1.log; fail "the first run's event file differs from its metrics.jsonl"; }
cat check1.log

"$LOOM" train --resume run --set max_steps=70 > resume.log 2>&1 || { cat resume.log; fail "resume"; }
"$PY" "$ROOT/tests/python/check_tensorboard.py" run 2 10 70 40 > check2.log 2>&1 ||
  { cat check2.log; fail "after the resume, TensorBoard's view differs from metrics.jsonl"; }
cat check2.log
echo "ok"
