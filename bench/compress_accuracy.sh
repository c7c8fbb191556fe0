#!/bin/bash
# bench/compress_accuracy.sh - test accuracy of Fashion-MNIST MLP training with each gradient
# codec and with block momentum, against fp32 in the same run:
#
#   bench/compress_accuracy.sh [--loom PATH] [--epochs 10] [--workers 2] [--configs "..."]
#
# Every config trains the same model (784-1024-1024-10, dropout 0.5, SGD momentum 0.9, lr 0.05,
# batch 128 per worker, seed 0) with `loom train` on the thread transport (accuracy does not
# depend on the transport). Prints a table (test accuracy after the last epoch, its
# difference from fp32 in points, bytes per step) and one JSON object per line
# ({"bench":"compress_accuracy",...}). At 10 epochs one config takes 4-20 min on the shared
# 2-core box (8 configs). onebit and topk1-default are the codecs with their default options;
# onebit-plain, onebit-noef and topk1 without them (no warm-up, momentum correction,
# gathering or exact small buckets), topk1-mc with DGC's momentum correction and masking. Run
# long jobs one config at a time with --configs NAME if need be.
# bench/codec_accuracy.sh compares codecs paired by seed over several seeds and run lengths.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
LOOM=${LOOM:-$root/build/loom}
EPOCHS=${EPOCHS:-10}
WORKERS=${WORKERS:-2}
CONFIGS=${CONFIGS:-"fp32 int8 onebit onebit-noef topk1 topk1-mc powersgd4 bmuf8"}
EXTRA=${EXTRA:-}
while [ $# -gt 0 ]; do
  case $1 in
    --loom) LOOM=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --configs) CONFIGS=$2; shift 2 ;;
    --set) EXTRA="$EXTRA $2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "compress_accuracy.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$LOOM" ] || { echo "compress_accuracy.sh: no loom binary at $LOOM (--loom PATH)" >&2; exit 2; }

# The codecs without the options that bench/codec_accuracy.sh measures (docs/compress.md):
# 1-bit in stripes with error feedback on the gradient, no warm-up; plain top-k.
ONEBIT_PLAIN="codec.warmup_steps=0 sync.momentum_correction=false codec.aggregation=stripes"
TOPK_PLAIN="sync.momentum_correction=false codec.min_bucket_kib=0"
config_args() {
  case $1 in
    fp32) echo "codec=fp32" ;;
    fp16) echo "codec=fp16" ;;
    bf16) echo "codec=bf16" ;;
    int8) echo "codec=int8" ;;
    onebit) echo "codec=onebit" ;;
    onebit-plain) echo "codec=onebit $ONEBIT_PLAIN" ;;
    onebit-noef) echo "codec=onebit codec.error_feedback=false $ONEBIT_PLAIN" ;;
    topk1) echo "codec=topk codec.topk_fraction=0.01 $TOPK_PLAIN" ;;
    topk1-mc) echo "codec=topk codec.topk_fraction=0.01 sync.momentum_correction=true sync.momentum_masking=true codec.min_bucket_kib=0" ;;
    topk1-default) echo "codec=topk codec.topk_fraction=0.01" ;;
    powersgd4) echo "codec=powersgd codec.powersgd_rank=4" ;;
    bmuf8) echo "sync=bmuf bmuf.tau=8" ;;
    bmuf8-onebit) echo "sync=bmuf bmuf.tau=8 codec=onebit" ;;
    *) echo "compress_accuracy.sh: unknown config '$1'" >&2; return 1 ;;
  esac
}
for c in $CONFIGS; do config_args "$c" >/dev/null; done

work=$(mktemp -d /tmp/loom_acc.XXXXXX)
trap 'rm -rf "$work"' EXIT
results="$work/results"
: >"$results"
for cfg in $CONFIGS; do
  sets=()
  for a in $(config_args "$cfg") $EXTRA; do sets+=(--set "$a"); done
  out="$work/$cfg"
  start=$(date +%s)
  if ! "$LOOM" train --set transport=thread --set workers="$WORKERS" --set epochs="$EPOCHS" \
      --set threads=1 --set progress=none --set output.dir="$out" "${sets[@]}" >"$work/$cfg.log" 2>&1; then
    echo "compress_accuracy.sh: $cfg failed:" >&2
    tail -5 "$work/$cfg.log" >&2
    continue
  fi
  /usr/bin/python3 - "$out" "$cfg" "$(( $(date +%s) - start ))" >>"$results" <<'PY'
import json, sys
d, cfg, secs = sys.argv[1], sys.argv[2], sys.argv[3]
s = json.load(open(f"{d}/summary.json"))
m = [j for j in (json.loads(l) for l in open(f"{d}/metrics.jsonl") if l.strip()) if j.get("kind", "epoch") == "epoch"]
steps = sum(e["steps"] for e in m)
print(cfg, s["test_acc"], sum(e["bytes_sent"] for e in m) / max(steps, 1), s["samples_per_s"], secs)
PY
  tail -1 "$results" >&2
done

/usr/bin/python3 - "$results" "$EPOCHS" "$WORKERS" <<'PY'
import json, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
epochs, workers = int(sys.argv[2]), int(sys.argv[3])
base = next((float(a) for c, a, *_ in rows if c == "fp32"), None)
print(f"Fashion-MNIST MLP, {workers} workers (threads), {epochs} epochs, batch 128/worker")
print(f"{'config':<13} {'test acc':>8} {'vs fp32 (points)':>17} {'MB/step':>8} {'samples/s':>10} {'wall s':>7}")
for c, a, b, sps, secs in rows:
    a, b = float(a), float(b)
    d = (a - base) * 100 if base is not None else float("nan")
    print(f"{c:<13} {a:>8.4f} {d:>+17.2f} {b/1e6:>8.3f} {float(sps):>10.0f} {int(secs):>7}")
for c, a, b, sps, secs in rows:
    print(json.dumps({"bench": "compress_accuracy", "config": c, "workers": workers,
                      "epochs": epochs, "test_acc": float(a),
                      "vs_fp32_points": (float(a) - base) * 100 if base is not None else None,
                      "bytes_per_step": float(b), "samples_per_s": float(sps)}))
PY
