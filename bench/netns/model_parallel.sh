#!/bin/bash
# bench/netns/model_parallel.sh - data parallelism against model parallelism (fp32 and 8-bit
# activations) for a wide MLP, 2 MPI ranks on a real (veth) link, unshaped and shaped:
#
#   sudo bench/netns/model_parallel.sh [--loom PATH] [--steps N] [--rates "off 1gbit"]
#                                      [--hidden 8192,8192] [--batch 128]
#
# Two network namespaces joined by a veth (lib.sh), shaped with tbf; `mpirun -np 2` puts one
# `loom train` rank in each namespace through rsh_agent.sh (Open MPI's TCP transport over the
# veth, as in compare.sh). For every rate it trains the Fashion-MNIST MLP 784-H-H-10 (batch B
# per rank, 1 thread per rank, no evaluation) for N steps in three configs:
#   dp-fp32   parallel=data: every rank holds the whole net, fp32 gradient allreduce
#   mp-fp32   parallel=model: dense layers split column -> row (docs/model_parallel.md)
#   mp-int8   parallel=model, parallel.activations=int8 (Dettmers' dynamic-tree codec)
# and reads samples/s (training loop) from summary.json and bytes sent per step per rank and
# communication seconds per step from metrics.jsonl. Prints a table, the verdict "mp-int8 vs
# dp-fp32 on each shaped link", and one JSON object per line ({"bench":"netns_model_parallel"}).
# The namespaces are deleted on exit. Needs root, iproute2, Open MPI, loom built with MPI.
#
# Accuracy (fp32 vs int8 activations) needs epochs, not N steps: bench/model_parallel.sh accuracy.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
LOOM=${LOOM:-$root/build/loom}
STEPS=${STEPS:-4}
RATES=${RATES:-"off 1gbit"}
HIDDEN=${HIDDEN:-8192,8192}
BATCH=${BATCH:-128}
CONFIGS="dp-fp32 mp-fp32 mp-int8"
TIMEOUT=${TIMEOUT:-240}
while [ $# -gt 0 ]; do
  case $1 in
    --loom) LOOM=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --rates) RATES=$2; shift 2 ;;
    --hidden) HIDDEN=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "model_parallel.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
# shellcheck source=bench/netns/lib.sh
. "$here/lib.sh"
netns_preflight model_parallel.sh "$LOOM"

config_args() {
  case $1 in
    dp-fp32) echo "parallel=data" ;;
    mp-fp32) echo "parallel=model parallel.activations=fp32" ;;
    mp-int8) echo "parallel=model parallel.activations=int8" ;;
    *) echo "model_parallel.sh: unknown config '$1'" >&2; return 1 ;;
  esac
}

netns_begin loom_netns_mp
work=$NB_WORK
netns_up
read -ra MPIRUN <<<"$(netns_mpirun_cmd "$work/hosts")"

run_one() {  # rate config -> prints "samples_per_s bytes_per_step comm_s_per_step"
  local rate=$1 cfg=$2 out="$work/$1-$2" sets=() a
  for a in $(config_args "$cfg"); do sets+=(--set "$a"); done
  mkdir -p "$out"
  if ! timeout "$TIMEOUT" "${MPIRUN[@]}" -np 2 "$LOOM" train --set "mlp.hidden=[$HIDDEN]" \
      --set batch="$BATCH" --set max_steps="$STEPS" --set epochs=1 --set eval=false --set progress=none \
      --set threads=1 --set log.level=warn --set output.dir="$out" "${sets[@]}" \
      >"$out/log" 2>&1; then
    echo "model_parallel.sh: $cfg at $rate failed; last lines of its log:" >&2
    tail -5 "$out/log" >&2
    echo "nan nan nan"
    return
  fi
  /usr/bin/python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
s = json.load(open(f"{d}/summary.json"))
m = [j for j in (json.loads(l) for l in open(f"{d}/metrics.jsonl") if l.strip()) if j.get("kind", "epoch") == "epoch"]
steps = max(sum(e["steps"] for e in m), 1)
print(s["samples_per_s"], sum(e["bytes_sent"] for e in m) / steps,
      sum(e["comm_s"] for e in m) / steps)
PY
}

results="$work/results"
: >"$results"
for rate in $RATES; do
  netns_shape "$rate"
  for cfg in $CONFIGS; do
    read -r sps bps cps < <(run_one "$rate" "$cfg")
    echo "$rate $cfg $sps $bps $cps" >>"$results"
    printf '  %-6s %-8s %10s samples/s\n' "$rate" "$cfg" "$sps" >&2
  done
done

/usr/bin/python3 - "$results" "$STEPS" "$HIDDEN" "$BATCH" <<'PY'
import json, math, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
steps, hidden, batch = int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
nan = float("nan")
r = {(rate, cfg): tuple(map(float, v)) for rate, cfg, *v in rows}
rates = list(dict.fromkeys(x[0] for x in rows))
cfgs = list(dict.fromkeys(x[1] for x in rows))
def ratio(a, b):
    return a / b if b and not math.isnan(a) and not math.isnan(b) else nan
net = "784-" + hidden.replace(",", "-") + "-10"
print(f"2 MPI ranks (one per network namespace), MLP {net}, batch {batch}/rank, {steps} steps")
print(f"{'link':<7} {'config':<8} {'samples/s':>10} {'MB/step/rank':>13} {'comm ms/step':>13} "
      f"{'x dp-fp32':>10} {'vs unshaped':>12}")
lines = []
for rate in rates:
    for cfg in cfgs:
        sps, bps, cps = r[(rate, cfg)]
        xdp = ratio(sps, r.get((rate, "dp-fp32"), (nan,))[0])
        un = ratio(sps, r.get(("off", cfg), (nan,))[0]) if rate != "off" else nan
        print(f"{rate:<7} {cfg:<8} {sps:>10.1f} {bps/1e6:>13.2f} {1e3*cps:>13.0f} {xdp:>10.2f} "
              f"{un:>12.2f}")
        lines.append({"bench": "netns_model_parallel", "link": rate, "config": cfg, "ranks": 2,
                      "net": net, "batch_per_rank": batch, "steps": steps,
                      "samples_per_s": sps, "bytes_per_step": bps, "comm_s_per_step": cps,
                      "x_dp_fp32": xdp, "x_unshaped": un})
for rate in rates:
    if rate == "off":
        continue
    x = ratio(r.get((rate, "mp-int8"), (nan,))[0], r.get((rate, "dp-fp32"), (nan,))[0])
    verdict = "beats" if x > 1 else "does NOT beat"
    print(f"verdict {rate}: model-parallel int8 {verdict} data-parallel fp32 ({x:.2f}x samples/s)")
for j in lines:
    print(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v)
                      for k, v in j.items()}))
PY
