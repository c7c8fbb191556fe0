#!/bin/bash
# bench/accuracy.sh - test accuracy of the default MLP recipe (784-1024-1024-10, dropout 0.5,
# batch 128, SGD momentum 0.9, lr 0.05, 1 worker) against the PyTorch peer on the same recipe,
# per seed, with a constant learning rate and with the cosine schedule of configs/mlp.toml:
#
#   bench/accuracy.sh [--loom PATH] [--epochs 3] [--seeds "0 1 2 3"] [--jobs 2] [--no-torch]
#
# PyTorch runs loom's peer bench/peers/torch_mlp.py (or $LOOM_TORCH_PEER) with the python of
# scripts/setup-bench (.venv, or $LOOM_PYTHON), both schedules (--schedule). Prints a table (accuracy after the last epoch, per seed and the mean) and one
# JSON object per line ({"bench":"accuracy",...}). Accuracy does not depend on machine load,
# so --jobs runs several trainings at once. 3 epochs x 4 seeds takes ~10 min on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
LOOM=${LOOM:-$root/build/loom}
PEER=${LOOM_TORCH_PEER:-$here/peers/torch_mlp.py}
PY=${LOOM_PYTHON:-$root/.venv/bin/python}
[ -x "$PY" ] || PY=/usr/bin/python3
EPOCHS=3
SEEDS="0 1 2 3"
JOBS=2
TORCH=1
while [ $# -gt 0 ]; do
  case $1 in
    --loom) LOOM=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --no-torch) TORCH=0; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "accuracy.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$LOOM" ] || { echo "accuracy.sh: no loom binary at $LOOM (run scripts/build)" >&2; exit 2; }
if [ "$TORCH" = 1 ] && ! "$PY" -c "import torch" 2>/dev/null; then
  echo "accuracy.sh: PyTorch is not installed for $PY (run scripts/setup-bench); loom only" >&2
  TORCH=0
fi
if [ "$TORCH" = 1 ] && [ ! -f "$PEER" ]; then
  echo "accuracy.sh: no PyTorch peer at $PEER (set LOOM_TORCH_PEER); loom only" >&2
  TORCH=0
fi
work=$(mktemp -d /tmp/loom_accuracy.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT

# One job per (who, schedule, seed); each writes its final accuracy to $work/<name>.acc.
jobs_file=$work/jobs
for seed in $SEEDS; do
  for sched in constant cosine; do
    echo "loom $sched $seed" >> "$jobs_file"
    [ "$TORCH" = 1 ] && echo "torch $sched $seed" >> "$jobs_file"
  done
done
run_one() {
  local who=$1 sched=$2 seed=$3 name="$1-$2-$3"
  if [ "$who" = loom ]; then
    "$LOOM" train "$root/configs/mlp.toml" --set seed="$seed" --set epochs="$EPOCHS" \
      --set lr.schedule="$sched" --set progress=none --set output.dir="$work/$name" \
      > "$work/$name.log" 2>&1
    grep -o '"test_acc": *[0-9.]*' "$work/$name/summary.json" | tr -d ' ' | cut -d: -f2 > "$work/$name.acc"
  else
    "$PY" "$PEER" --threads 1 --seed "$seed" --epochs "$EPOCHS" --schedule "$sched" \
      > "$work/$name.log" 2>&1
    grep -o 'test_acc [0-9.]*' "$work/$name.log" | tail -1 | cut -d' ' -f2 > "$work/$name.acc"
  fi
}
export -f run_one
export LOOM PEER PY EPOCHS work root here
xargs -P "$JOBS" -L 1 bash -c 'run_one "$@" || echo "accuracy.sh: $* failed (log: $work/$1-$2-$3.log)" >&2' _ < "$jobs_file"

printf '\nFashion-MNIST MLP, %s epochs, test accuracy after the last epoch\n' "$EPOCHS"
printf '%-22s' "run"
for seed in $SEEDS; do printf '%9s' "seed $seed"; done
printf '%9s\n' "mean"
for who in loom torch; do
  [ "$who" = torch ] && [ "$TORCH" = 0 ] && continue
  for sched in constant cosine; do
    printf '%-22s' "$who, lr $sched"
    sum=0; n=0
    for seed in $SEEDS; do
      acc=$(cat "$work/$who-$sched-$seed.acc" 2>/dev/null || true)
      printf '%9s' "${acc:--}"
      if [ -n "$acc" ]; then sum=$(awk -v a="$sum" -v b="$acc" 'BEGIN{print a + b}'); n=$((n + 1)); fi
      echo "{\"bench\":\"accuracy\",\"who\":\"$who\",\"schedule\":\"$sched\",\"seed\":$seed,\"epochs\":$EPOCHS,\"test_acc\":${acc:-null}}" >> "$work/json"
    done
    if [ $n -gt 0 ]; then awk -v s="$sum" -v n="$n" 'BEGIN{printf "%9.4f\n", s / n}'; else printf '%9s\n' -; fi
  done
done
echo
cat "$work/json"
