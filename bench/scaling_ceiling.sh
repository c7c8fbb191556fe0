#!/bin/bash
# bench/scaling_ceiling.sh - the most 2 workers could reach on this machine: the samples/s of
# one single-worker training alone, then of two single-worker trainings (separate processes,
# nothing exchanged) at once. Their sum over the lone run is the scaling a data-parallel run
# would show with free communication; `loom bench train --workers 1 2` is measured against it.
# Two processes at once share the memory bandwidth and last-level cache and lose the spare
# core the lone run's loader thread uses, so the ceiling sits below 2.
#
#   bench/scaling_ceiling.sh [--loom PATH] [--rounds 3] [--steps 600]
#
# Prints one line per round and one JSON object per round ({"bench":"scaling_ceiling",...}).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
LOOM=$root/build/loom
ROUNDS=3
STEPS=600
while [ $# -gt 0 ]; do
  case "$1" in
    --loom) LOOM=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    *) echo "scaling_ceiling.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$LOOM" ] || { echo "scaling_ceiling.sh: $LOOM is not an executable (build first: scripts/build)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
one() {  # samples/s of one single-worker training
  "$LOOM" bench train --workers 1 --peer none --repeats 1 --steps "$STEPS" --json "$1" > /dev/null
  python3 -c "import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if '\"loom\"' in l][0]['samples_per_s'])" "$1"
}
for r in $(seq 1 "$ROUNDS"); do
  alone=$(one "$tmp/a.json")
  one "$tmp/b.json" > "$tmp/b.txt" &
  c=$(one "$tmp/c.json")
  wait
  b=$(cat "$tmp/b.txt")
  python3 - "$r" "$alone" "$b" "$c" <<'PY'
import json, sys
r, alone, b, c = int(sys.argv[1]), *map(float, sys.argv[2:])
print(f"round {r}: alone {alone:.0f} samples/s, two at once {b:.0f} + {c:.0f} = {b + c:.0f}: ceiling {(b + c) / alone:.2f}x")
print(json.dumps({"bench": "scaling_ceiling", "round": r, "alone": alone, "together": [b, c], "ceiling": (b + c) / alone}))
PY
done
