#!/bin/bash
# bench/netns/compare.sh - samples/s of 2-rank data-parallel training on a bandwidth-limited
# link, per codec and strategy, in one run:
#
#   sudo bench/netns/compare.sh [--loom PATH] [--steps N] [--epochs E] [--rates "1gbit off"]
#                               [--configs "..."] [--repeats R] [--network mlp|gpt-char]
#                               [--data DIR]
#
# Two network namespaces joined by a veth (lib.sh), shaped with tbf; `mpirun -np 2` puts one
# `loom train` rank in each namespace through rsh_agent.sh (Open MPI's TCP transport over the
# veth). For every rate and config it trains the Fashion-MNIST MLP (784-1024-1024-10, batch
# 128 per rank, 1 thread per rank) for N steps (--steps 0: E epochs, the whole run; the
# default job is --steps 0 --epochs 3) and reads samples/s (training loop only) and
# bytes sent per step from the run's summary.json / metrics.jsonl. Prints a table and one
# JSON object per line ({"bench":"netns_compare",...}); with --repeats R each config runs R
# times, the configs taking turns, and the best samples/s is kept. Configs: fp32, fp16, bf16,
# int8, onebit, topk, powersgd (each codec with its defaults), onebit-plain (1-bit without the
# warm-up, momentum correction and gathering: codec.warmup_steps = 0,
# sync.momentum_correction = false, codec.aggregation = "stripes"), bmuf8, bmuf8-onebit, and
# onebit_adam (optim.name = "onebit_adam": 1-bit Adam, for an Adam recipe).
# --network gpt-char trains configs/gpt_char.toml instead (AdamW, 2 ranks x 16 windows of 128
# bytes; --data DIR holds scripts/fortunes-shards' train.shard and valid.shard); its samples are
# windows, so tokens/s is 128 x samples/s and the ratios are the same.
# The namespaces are deleted on exit, whatever happens. Needs root, iproute2 (ip, tc), Open
# MPI, and loom built with MPI.
#
# Accuracy is not measured here (N steps are too few); bench/compress_accuracy.sh does that.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
LOOM=${LOOM:-$root/build/loom}
STEPS=${STEPS:-150}
EPOCHS=${EPOCHS:-1}
REPEATS=${REPEATS:-1}
RATES=${RATES:-"1gbit off"}
CONFIGS=${CONFIGS:-"fp32 fp16 int8 onebit bmuf8 bmuf8-onebit"}
TIMEOUT=${TIMEOUT:-300}
NETWORK=mlp
DATA=
while [ $# -gt 0 ]; do
  case $1 in
    --loom) LOOM=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --rates) RATES=$2; shift 2 ;;
    --configs) CONFIGS=$2; shift 2 ;;
    --network) NETWORK=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
recipe=()  # the network's recipe: the MLP is loom's default job
case $NETWORK in
  mlp) ;;
  gpt-char)
    [ -f "$DATA/train.shard" ] && [ -f "$DATA/valid.shard" ] ||
      { echo "compare.sh: --network gpt-char needs --data DIR with train.shard and valid.shard (scripts/fortunes-shards DIR bytes)" >&2; exit 2; }
    recipe=("$root/configs/gpt_char.toml" --set data.train_shards="$DATA/train.shard"
            --set data.validation="$DATA/valid.shard") ;;
  *) echo "compare.sh: --network is mlp or gpt-char, not '$NETWORK'" >&2; exit 2 ;;
esac
# shellcheck source=bench/netns/lib.sh
. "$here/lib.sh"
netns_preflight compare.sh "$LOOM"

# name -> loom --set arguments
config_args() {
  case $1 in
    fp32) echo "codec=fp32" ;;
    fp16) echo "codec=fp16" ;;
    bf16) echo "codec=bf16" ;;
    int8) echo "codec=int8" ;;
    onebit) echo "codec=onebit" ;;
    onebit-plain) echo "codec=onebit codec.warmup_steps=0 sync.momentum_correction=false codec.aggregation=stripes" ;;
    topk) echo "codec=topk" ;;
    powersgd) echo "codec=powersgd" ;;
    bmuf8) echo "sync=bmuf bmuf.tau=8" ;;
    bmuf8-onebit) echo "sync=bmuf bmuf.tau=8 codec=onebit" ;;
    onebit_adam) echo "optim.name=onebit_adam" ;;
    *) echo "compare.sh: unknown config '$1'" >&2; return 1 ;;
  esac
}
for c in $CONFIGS; do config_args "$c" >/dev/null; done

netns_begin loom_netns
work=$NB_WORK
netns_up
read -ra MPIRUN <<<"$(netns_mpirun_cmd "$work/hosts")"

run_one() {  # rate config repeat -> prints "samples_per_s bytes_per_step"
  local rate=$1 cfg=$2 out="$work/$1-$2-$3" sets=() a
  for a in $(config_args "$cfg"); do sets+=(--set "$a"); done
  mkdir -p "$out"
  if ! timeout "$TIMEOUT" "${MPIRUN[@]}" -np 2 "$LOOM" train "${recipe[@]}" --set max_steps="$STEPS" \
      --set epochs="$EPOCHS" --set eval=false --set progress=none --set threads=1 --set output.dir="$out" "${sets[@]}" \
      >"$out/log" 2>&1; then
    echo "compare.sh: $cfg at $rate failed; last lines of its log:" >&2
    tail -5 "$out/log" >&2
    echo "nan nan"
    return
  fi
  /usr/bin/python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
s = json.load(open(f"{d}/summary.json"))
m = [j for j in (json.loads(l) for l in open(f"{d}/metrics.jsonl") if l.strip()) if j.get("kind", "epoch") == "epoch"]
steps = sum(e["steps"] for e in m)
print(s["samples_per_s"], sum(e["bytes_sent"] for e in m) / max(steps, 1))
PY
}

results="$work/results"
: >"$results"
for rate in $RATES; do
  netns_shape "$rate"
  for rep in $(seq "$REPEATS"); do
    for cfg in $CONFIGS; do
      read -r sps bps < <(run_one "$rate" "$cfg" "$rep")
      echo "$rate $cfg $sps $bps" >>"$results"
      printf '  %-6s %-13s %8s samples/s\n' "$rate" "$cfg" "$sps" >&2
    done
  done
done

/usr/bin/python3 - "$results" "$STEPS" "$EPOCHS" "$NETWORK" <<'PY'
import json, math, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
steps, epochs, network = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
r = {}
for rate, cfg, s, b in rows:  # the best of the repeats
    if (rate, cfg) not in r or float(s) > r[(rate, cfg)][0]:
        r[(rate, cfg)] = (float(s), float(b))
rates = list(dict.fromkeys(x[0] for x in rows))
cfgs = list(dict.fromkeys(x[1] for x in rows))
def ratio(a, b):
    return a / b if b and not math.isnan(a) and not math.isnan(b) else float("nan")
length = f"{steps} steps" if steps > 0 else f"{epochs} epochs"
what = ("MLP 784-1024-1024-10, batch 128/rank" if network == "mlp" else
        "gpt-char (configs/gpt_char.toml), 16 windows of 128 bytes/rank")
print(f"2 ranks (one per network namespace), {what}, {length}")
print(f"{'link':<7} {'config':<13} {'samples/s':>10} {'MB/step':>8} {'x fp32':>7} {'x fp16':>7} {'vs unshaped':>11}")
lines = []
for rate in rates:
    for cfg in cfgs:
        sps, bps = r[(rate, cfg)]
        f32 = ratio(sps, r.get((rate, "fp32"), (float("nan"),))[0])
        f16 = ratio(sps, r.get((rate, "fp16"), (float("nan"),))[0])
        un = ratio(sps, r.get(("off", cfg), (float("nan"),))[0]) if rate != "off" else float("nan")
        print(f"{rate:<7} {cfg:<13} {sps:>10.0f} {bps/1e6:>8.3f} {f32:>7.2f} {f16:>7.2f} {un:>11.2f}")
        lines.append({"bench": "netns_compare", "network": network, "link": rate, "config": cfg, "ranks": 2,
                      "steps": steps, "epochs": epochs, "samples_per_s": sps, "bytes_per_step": bps,
                      "x_fp32": f32, "x_fp16": f16, "x_unshaped": un})
for j in lines:
    print(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in j.items()}))
PY
