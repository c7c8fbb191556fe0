#!/bin/bash
# bench/resnet20.sh - ResNet-20 (configs/resnet20.toml) against the PyTorch peer on the same
# network and recipe (bench/peers/torch_resnet20.py), in the same run:
#
#   bench/resnet20.sh speed    [--rounds 3] [--steps 60]   # samples/s at 1 thread, alternating
#   bench/resnet20.sh accuracy [--epochs 5] [--seed 0]      # test accuracy after the last epoch
#   bench/resnet20.sh scaling  [--steps 60]                 # 2 workers against free communication
#   bench/resnet20.sh ddp      [--rounds 3] [--steps 60]   # 2 workers against PyTorch DDP
#
# speed: each round runs loom, then every PyTorch peer (each PyTorch found, in NCHW and
#   channels-last, PyTorch 2 also compiled), for --steps steps at 1 thread (evaluation off);
#   prints each one's best round and loom's ratio to each and to the fastest.
# accuracy: loom then PyTorch, --epochs each (minutes per epoch on a few cores).
# scaling: the samples/s of one 1-worker run alone, of two 1-worker runs at once (nothing
#   exchanged: the most 2 workers could reach, as bench/scaling_ceiling.sh), and of one
#   2-worker run; prints the 2-worker run over the two-at-once sum.
# ddp: loom with 2 workers (batch 64 each, 1 thread) against the peer under
#   DistributedDataParallel (gloo over the loopback, 2 processes x 1 thread, batch 64 each) with
#   every PyTorch found, in NCHW and channels-last; --rounds turns, each keeps its best.
# One JSON object per result line ({"bench":"resnet20",...}).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
LOOM=${LOOM:-$root/build/loom}
PY=${LOOM_PYTHON:-$root/.venv/bin/python}
[ -x "$PY" ] || PY=/usr/bin/python3
PEER=$here/peers/torch_resnet20.py
MODE=${1:-speed}
shift || true
ROUNDS=3 STEPS=60 EPOCHS=5 SEED=0
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    *) echo "resnet20.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -x "$LOOM" ] || { echo "resnet20.sh: no loom at $LOOM (run scripts/build)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
loom_rate() {  # samples/s of `loom train` from summary.json; $1 = output dir, rest = --set args
  local dir=$1; shift
  "$LOOM" train "$root/configs/resnet20.toml" --set progress=none --set output.dir="$dir" \
    --force "$@" > "$dir.log" 2>&1 || { cat "$dir.log" >&2; exit 1; }
  python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(s['samples_per_s'], s['test_acc'])" "$dir/summary.json"
}
torch_result() {  # "samples/s test_acc" from the peer's RESULT line
  "$PY" "$PEER" "$@" > "$tmp/torch.log" 2>&1 || { cat "$tmp/torch.log" >&2; exit 1; }
  sed -n 's/.*median_samples_per_s=\([0-9.]*\) final_test_acc=\([0-9.na]*\).*/\1 \2/p' "$tmp/torch.log"
}
# shellcheck source=bench/peer_lib.sh
. "$here/peer_lib.sh"
case $MODE in
  speed)
    # Each PyTorch in NCHW and channels-last, the newest also compiled. Each keeps its best
    # round; the ratio is against the fastest.
    read -ra pys <<< "$(peer_pythons)"
    peer_variants=()
    for p in "${pys[@]}"; do
      v=$("$p" -c 'import torch; print(torch.__version__)')
      peer_variants+=("$p|$v|" "$p|$v channels-last|--channels-last")
      case $v in 1.*) ;; *) peer_variants+=("$p|$v compiled|--compile") ;; esac
    done
    results=()
    for r in $(seq 1 "$ROUNDS"); do
      read -r l _ < <(loom_rate "$tmp/l" --set max_steps="$STEPS" --set threads=1 --set eval=false --set seed="$SEED")
      results+=("loom=$l")
      echo "round $r: loom $l samples/s"
      for pv in "${peer_variants[@]}"; do
        IFS='|' read -r p name flags <<< "$pv"
        # shellcheck disable=SC2086
        read -r t _ < <(PY=$p torch_result --threads 1 --max-steps "$STEPS" --seed "$SEED" $flags)
        results+=("PyTorch $name=$t")
        echo "round $r: PyTorch $name $t samples/s"
      done
    done
    python3 "$here/best_of_rounds.py" resnet20 speed "1 thread" samples/s "$STEPS" "$ROUNDS" "${results[@]}"
    ;;
  accuracy)
    read -r l la < <(loom_rate "$tmp/l" --set epochs="$EPOCHS" --set seed="$SEED" --set threads=2)
    read -r t ta < <(torch_result --threads 2 --epochs "$EPOCHS" --seed "$SEED")
    echo "after $EPOCHS epochs, seed $SEED: loom test accuracy $la ($l samples/s), PyTorch $ta ($t samples/s)"
    echo "{\"bench\":\"resnet20\",\"mode\":\"accuracy\",\"epochs\":$EPOCHS,\"seed\":$SEED,\"loom_acc\":$la,\"torch_acc\":$ta}" ;;
  scaling)
    common=(--set max_steps="$STEPS" --set threads=1 --set eval=false)
    read -r alone _ < <(loom_rate "$tmp/a" "${common[@]}")
    loom_rate "$tmp/b" "${common[@]}" > "$tmp/b.txt" &
    read -r c _ < <(loom_rate "$tmp/c" "${common[@]}")
    wait
    read -r b _ < "$tmp/b.txt"
    read -r two _ < <(loom_rate "$tmp/d" "${common[@]}" --set workers=2)
    python3 - "$alone" "$b" "$c" "$two" <<'PY'
import json, sys
alone, b, c, two = map(float, sys.argv[1:])
print(f"alone {alone:.1f} samples/s; two 1-worker runs at once {b:.1f} + {c:.1f} = {b + c:.1f}; "
      f"one 2-worker run {two:.1f}: {two / (b + c):.2f} of free communication")
print(json.dumps({"bench": "resnet20", "mode": "scaling", "alone": alone, "together": b + c, "two_workers": two, "of_ceiling": two / (b + c)}))
PY
    ;;
  ddp)
    read -ra pys <<< "$(peer_pythons)"
    results=()
    for r in $(seq 1 "$ROUNDS"); do
      read -r l _ < <(loom_rate "$tmp/l" --set max_steps="$STEPS" --set threads=1 --set eval=false --set seed="$SEED" --set workers=2)
      results+=("loom=$l")
      echo "round $r: loom $l samples/s"
      for p in "${pys[@]}"; do
        v=$("$p" -c 'import torch; print(torch.__version__)')
        for layout in "" --channels-last; do
          port=$(free_port)
          ddp=(--threads 1 --max-steps "$STEPS" --seed "$SEED" --world 2 --master "127.0.0.1:$port" $layout)
          "$p" "$PEER" "${ddp[@]}" --rank 1 > "$tmp/rank1.log" 2>&1 &
          rank1=$!
          read -r t _ < <(PY=$p torch_result "${ddp[@]}" --rank 0)
          wait "$rank1" || { cat "$tmp/rank1.log" >&2; exit 1; }
          results+=("PyTorch $v DDP${layout:+ channels-last}=$t")
          echo "round $r: PyTorch $v DDP${layout:+ channels-last} $t samples/s"
        done
      done
    done
    python3 "$here/best_of_rounds.py" resnet20 ddp "2 workers x 1 thread" samples/s "$STEPS" "$ROUNDS" "${results[@]}"
    ;;
  *) echo "resnet20.sh: mode is speed, accuracy, scaling or ddp, not '$MODE'" >&2; exit 2 ;;
esac
