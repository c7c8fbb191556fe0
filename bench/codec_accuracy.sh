#!/bin/bash
# bench/codec_accuracy.sh - test accuracy of lossy codecs against fp32, paired by seed, on the
# default job (configs/mlp.toml: the Fashion-MNIST MLP, cosine lr, 2 workers on the thread
# transport), over several seeds and run lengths:
#
#   bench/codec_accuracy.sh [--loom PATH] [--epochs "3 5 10"] [--seeds "0 1 2 3 4"]
#                           [--configs "fp32 onebit topk"] [--set key=value ...] [--keep DIR]
#
# Every (epochs, seed) trains fp32 and each config from the same seed: the same initial weights,
# data order and dropout, so codec - fp32 of one seed is a paired difference. Prints one line per
# run as it finishes, then a table per epoch count (each seed's test accuracy and difference in
# points, the mean difference and its standard error, samples/s as the mean over the seeds) and
# one JSON object per run ({"bench":"codec_accuracy",...}). Configs: fp32, onebit and topk (the
# defaults a user gets from `codec = ...`), onebit-plain and topk-plain (the same codecs with
# the warm-up, momentum correction, gathering and exact small buckets turned off), and
# onebit-w<N> (onebit with codec.warmup_steps = N). A 3-epoch run takes 15-25 s on a 2-core
# box (top-k 60-120 s: its selection is the slow part); --keep DIR keeps each run's directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
LOOM=${LOOM:-$root/build/loom}
EPOCHS=${EPOCHS:-3}
SEEDS=${SEEDS:-"0 1 2 3 4"}
CONFIGS=${CONFIGS:-"fp32 onebit topk"}
EXTRA=${EXTRA:-}
KEEP=
while [ $# -gt 0 ]; do
  case $1 in
    --loom) LOOM=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --configs) CONFIGS=$2; shift 2 ;;
    --set) EXTRA="$EXTRA $2"; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "codec_accuracy.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$LOOM" ] || { echo "codec_accuracy.sh: no loom binary at $LOOM (--loom PATH)" >&2; exit 2; }

config_args() {
  case $1 in
    fp32) echo "codec=fp32" ;;
    onebit) echo "codec=onebit" ;;
    onebit-plain) echo "codec=onebit codec.warmup_steps=0 sync.momentum_correction=false codec.aggregation=stripes" ;;
    onebit-w*) echo "codec=onebit codec.warmup_steps=${1#onebit-w}" ;;
    topk) echo "codec=topk" ;;
    topk-plain) echo "codec=topk sync.momentum_correction=false codec.min_bucket_kib=0" ;;
    *) echo "codec_accuracy.sh: unknown config '$1'" >&2; return 1 ;;
  esac
}
for c in $CONFIGS; do config_args "$c" >/dev/null; done
case " $CONFIGS " in *" fp32 "*) ;; *) CONFIGS="fp32 $CONFIGS" ;; esac

work=${KEEP:-$(mktemp -d /tmp/loom_codec_acc.XXXXXX)}
mkdir -p "$work"
[ -n "$KEEP" ] || trap 'rm -rf "$work"' EXIT
results="$work/results"
: >"$results"
for epochs in $EPOCHS; do
  for seed in $SEEDS; do
    for cfg in $CONFIGS; do
      sets=()
      for a in $(config_args "$cfg") $EXTRA; do sets+=(--set "$a"); done
      out="$work/$cfg-e$epochs-s$seed"
      if ! "$LOOM" train "$root/configs/mlp.toml" --set transport=thread --set workers=2 \
          --set epochs="$epochs" --set seed="$seed" --set progress=none \
          --set output.dir="$out" "${sets[@]}" >"$out.log" 2>&1; then
        echo "codec_accuracy.sh: $cfg, $epochs epochs, seed $seed failed:" >&2
        tail -5 "$out.log" >&2
        continue
      fi
      /usr/bin/python3 - "$out" "$cfg" "$epochs" "$seed" >>"$results" <<'PY'
import json, sys
d, cfg, epochs, seed = sys.argv[1:5]
s = json.load(open(f"{d}/summary.json"))
print(cfg, epochs, seed, s["test_acc"], s["samples_per_s"], s["params_fnv1a64"])
PY
      tail -1 "$results" >&2
    done
  done
done

/usr/bin/python3 - "$results" <<'PY'
import json, math, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
acc = {(c, int(e), int(s)): float(a) for c, e, s, a, _, _ in rows}
sps = {(c, int(e), int(s)): float(x) for c, e, s, _, x, _ in rows}
cfgs = list(dict.fromkeys(r[0] for r in rows))
epochs = sorted({int(r[1]) for r in rows})
seeds = sorted({int(r[2]) for r in rows})
for e in epochs:
    print(f"\n{e} epochs, 2 workers: test accuracy (codec - fp32 in points, paired by seed)")
    print(f"{'config':<14}" + "".join(f"{'seed ' + str(s):>17}" for s in seeds)
          + f"{'mean diff':>11}{'+- se':>7}{'samples/s':>11}")
    for c in cfgs:
        line, diffs = f"{c:<14}", []
        for s in seeds:
            a, b = acc.get((c, e, s)), acc.get(("fp32", e, s))
            if a is None:
                line += f"{'-':>17}"
            elif c == "fp32" or b is None:
                line += f"{a:>17.4f}"
            else:
                diffs.append(100 * (a - b))
                line += f"{a:>10.4f} ({diffs[-1]:+.2f})"
        if diffs:
            m = sum(diffs) / len(diffs)
            se = (math.sqrt(sum((d - m) ** 2 for d in diffs) / (len(diffs) - 1) / len(diffs))
                  if len(diffs) > 1 else float("nan"))
            line += f"{m:>+11.2f}{se:>7.2f}"
        else:
            line += f"{'':>11}{'':>7}"
        v = [sps[(c, e, s)] for s in seeds if (c, e, s) in sps]
        line += f"{sum(v) / len(v):>11.0f}" if v else ""
        print(line)
print()
for c, e, s, a, x, h in rows:
    b = acc.get(("fp32", int(e), int(s)))
    print(json.dumps({"bench": "codec_accuracy", "config": c, "epochs": int(e), "seed": int(s),
                      "workers": 2, "test_acc": float(a),
                      "vs_fp32_points": None if b is None else 100 * (float(a) - b),
                      "samples_per_s": float(x), "params_fnv1a64": h}))
PY
