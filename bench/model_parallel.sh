#!/usr/bin/env bash
# Model parallelism against data parallelism (docs/model_parallel.md), on this machine's
# thread transport (unshaped: shared memory). Prints a table and one JSON object per line.
#
#   bench/model_parallel.sh [LOOM] [wide|accuracy|all]
#
# wide:     784-8192-8192-10 MLP, 2 workers x batch 128: bytes/step and samples/s for
#           data-parallel, model-parallel fp32 and model-parallel int8 activations
#           (WIDE_STEPS steps each, default 6; no evaluation).
# accuracy: Fashion-MNIST test accuracy, 784-1024-1024-10, 2 workers, model-parallel with fp32
#           and with int8 activations (ACC_EPOCHS epochs, default 1: a short run).
set -euo pipefail
LOOM=${1:-build/loom}
WHAT=${2:-all}
OUT=$(mktemp -d /tmp/loom_mp_bench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
WIDE_STEPS=${WIDE_STEPS:-6}
ACC_EPOCHS=${ACC_EPOCHS:-1}

run() {  # name, then --set arguments
  local name=$1
  shift
  local args=()
  for kv in "$@"; do args+=(--set "$kv"); done
  "$LOOM" train "${args[@]}" --set progress=none --set log.level=warn \
    --set output.dir="$OUT/$name" >/dev/null
}

report() {  # name, mode, activations
  python3 - "$OUT/$1" "$1" "$2" "$3" <<'PY'
import json, sys
d, name, mode, act = sys.argv[1:5]
m = [json.loads(l) for l in open(d + "/metrics.jsonl")]
steps = sum(e["steps"] for e in m)
secs = sum(e["seconds"] for e in m)
j = {"bench": "model_parallel", "case": name, "parallel": mode, "activations": act,
     "workers": m[-1]["workers"], "steps": steps,
     "bytes_per_step": sum(e["bytes_sent"] for e in m) / max(steps, 1),
     "samples_per_s": sum(e["samples_per_s"] * e["seconds"] for e in m) / max(secs, 1e-9),
     "comm_s_per_step": sum(e["comm_s"] for e in m) / max(steps, 1),
     "test_acc": m[-1]["test_acc"]}
print(f"{name:<22} {mode:<6} {act:<5} {j['bytes_per_step']/1e6:>12.2f} {j['samples_per_s']:>10.1f} "
      f"{1e3*j['comm_s_per_step']:>10.1f} {j['test_acc']:>8.4f}")
print(json.dumps(j), file=sys.stderr)
PY
}

echo "# case                   mode   acts  MB/step/rank  samples/s  comm ms   test acc"
if [[ $WHAT == wide || $WHAT == all ]]; then
  common=(workers=2 batch=128 'mlp.hidden=[8192,8192]' max_steps=$WIDE_STEPS eval=false epochs=1)
  run wide-data "${common[@]}" parallel=data
  report wide-data data fp32
  run wide-model-fp32 "${common[@]}" parallel=model parallel.activations=fp32
  report wide-model-fp32 model fp32
  run wide-model-int8 "${common[@]}" parallel=model parallel.activations=int8
  report wide-model-int8 model int8
fi
if [[ $WHAT == accuracy || $WHAT == all ]]; then
  common=(workers=2 batch=128 epochs=$ACC_EPOCHS seed=1)
  run acc-model-fp32 "${common[@]}" parallel=model parallel.activations=fp32
  report acc-model-fp32 model fp32
  run acc-model-int8 "${common[@]}" parallel=model parallel.activations=int8
  report acc-model-int8 model int8
fi
