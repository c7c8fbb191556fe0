#!/usr/bin/env bash
# Model parallelism against data parallelism (docs/model_parallel.md), on this machine's
# thread transport (unshaped: shared memory). Prints a table and one JSON object per line.
#
#   bench/model_parallel.sh [LOOM] [wide|accuracy|all]
#
# wide:     784-8192-8192-10 MLP, 2 workers x batch 128: bytes/step and samples/s for
#           data-parallel, model-parallel fp32 and model-parallel int8 activations
#           (WIDE_STEPS steps each, default 6; no evaluation).
# accuracy: Fashion-MNIST test accuracy, 784-1024-1024-10, 2 workers x batch 128,
#           model-parallel with fp32 and with int8 activations (ACC_EPOCHS epochs, default 3;
#           ACC_SEEDS, default "1 2 3"), the difference in points per seed and its mean, against
#           the issue's goal (int8 at most 0.5 points below fp32).
# The same comparison on a real link (2 MPI ranks, unshaped and 1 Gbit/s): bench/netns/model_parallel.sh.
set -euo pipefail
LOOM=${1:-build/loom}
WHAT=${2:-all}
OUT=$(mktemp -d /tmp/loom_mp_bench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
WIDE_STEPS=${WIDE_STEPS:-6}
ACC_EPOCHS=${ACC_EPOCHS:-3}
ACC_SEEDS=${ACC_SEEDS:-"1 2 3"}

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
m = [j for j in (json.loads(l) for l in open(d + "/metrics.jsonl") if l.strip()) if j.get("kind", "epoch") == "epoch"]
steps = sum(e["steps"] for e in m)
secs = sum(e["seconds"] for e in m)
j = {"bench": "model_parallel", "case": name, "parallel": mode, "activations": act,
     "workers": m[-1]["workers"], "steps": steps,
     "bytes_per_step": sum(e["bytes_sent"] for e in m) / max(steps, 1),
     "samples_per_s": sum(e["samples_per_s"] * e["seconds"] for e in m) / max(secs, 1e-9),
     "comm_s_per_step": sum(e["comm_s"] for e in m) / max(steps, 1),
     "test_acc": json.load(open(d + "/summary.json"))["test_acc"]}
print(f"{name:<22} {mode:<6} {act:<5} {j['bytes_per_step']/1e6:>12.2f} {j['samples_per_s']:>10.1f} "
      f"{1e3*j['comm_s_per_step']:>10.1f} {j['test_acc']:>8.4f}")
print(json.dumps(j), file=sys.stderr)
PY
}

echo "# case                   mode   acts  MB/step/rank  samples/s  comm ms   test acc"
if [[ $WHAT == wide || $WHAT == all ]]; then
  common=(workers=2 batch=128 'mlp.hidden=[8192,8192]' "max_steps=$WIDE_STEPS" eval=false epochs=1)
  run wide-data "${common[@]}" parallel=data
  report wide-data data fp32
  run wide-model-fp32 "${common[@]}" parallel=model parallel.activations=fp32
  report wide-model-fp32 model fp32
  run wide-model-int8 "${common[@]}" parallel=model parallel.activations=int8
  report wide-model-int8 model int8
fi
if [[ $WHAT == accuracy || $WHAT == all ]]; then
  read -r -a seeds <<<"$ACC_SEEDS"
  for seed in "${seeds[@]}"; do
    common=(workers=2 batch=128 "epochs=$ACC_EPOCHS" "seed=$seed")
    run acc-model-fp32-s"$seed" "${common[@]}" parallel=model parallel.activations=fp32
    report acc-model-fp32-s"$seed" model fp32
    run acc-model-int8-s"$seed" "${common[@]}" parallel=model parallel.activations=int8
    report acc-model-int8-s"$seed" model int8
  done
  # The goal: 8-bit activations cost at most 0.5 points against fp32. One seed's difference
  # is within run-to-run noise of a few tenths either way, hence the mean over seeds.
  python3 - "$OUT" "$ACC_EPOCHS" "${seeds[@]}" <<'PY'
import json, sys
out, epochs, seeds = sys.argv[1], sys.argv[2], sys.argv[3:]
def acc(k, s):
    return json.load(open(f"{out}/acc-model-{k}-s{s}/summary.json"))["test_acc"]
diffs = []
for s in seeds:
    f, i = acc("fp32", s), acc("int8", s)
    diffs.append(100 * (i - f))
    print(f"accuracy seed {s}, {epochs} epochs: fp32 activations {f:.4f}, int8 {i:.4f}: "
          f"{diffs[-1]:+.2f} points")
m = sum(diffs) / len(diffs)
print(f"accuracy int8 - fp32 activations, mean over {len(seeds)} seeds: {m:+.2f} points "
      f"(worst {min(diffs):+.2f}); goal: no more than 0.5 points below fp32: "
      f"{'met' if min(diffs) >= -0.5 else 'NOT met'}")
PY
fi
