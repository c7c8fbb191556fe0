#!/usr/bin/env bash
# A checkpoint of `mpirun -np 2 loom train` resumed with `mpirun -np 1` (docs/checkpoint.md,
# "Another world size"): the global batch is kept (batch 64 per rank becomes 128), every rank
# file is read to put the sharded optimizer state together, and the mean training loss of the
# 40 steps after the resume is within 2% of the uninterrupted run's same steps. A rank file
# missing from the checkpoint stops the resume with exit 2 naming it.
# Usage: mpi_reshard_test.sh path/to/loom
set -uo pipefail
LOOM=$(realpath "${1:?usage: mpi_reshard_test.sh path/to/loom}")
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
"$LOOM" --version | grep -q "mpi=yes" || { echo "SKIP: this loom was built without MPI"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mpi() { local np=$1; shift; timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$np" "$@"; }
ARGS=(--set batch=64 --set max_steps=60 --set epochs=1 --set eval=false --set progress=none
      --set log.level=info --set "mlp.hidden=[32,16]" --set train.checkpoint_every=20
      --set train.log_every=1)

mpi 2 "$LOOM" train "${ARGS[@]}" --set output.dir="$T/ref" >"$T/ref.log" 2>&1 ||
  { cat "$T/ref.log"; echo "FAIL: the 2-rank run failed"; exit 1; }
cp -r "$T/ref" "$T/one"
mpi 1 "$LOOM" train --resume "$T/one/checkpoints/step-000000000020" >"$T/one.log" 2>&1 ||
  { cat "$T/one.log"; echo "FAIL: the resume on 1 rank failed"; exit 1; }
grep -q "batch 128 per worker (was 64), the global batch of 128 kept" "$T/one.log" ||
  { cat "$T/one.log"; echo "FAIL: no line saying the batch per worker"; exit 1; }
grep -q "written by 2 workers, resharded to 1" "$T/one.log" ||
  { cat "$T/one.log"; echo "FAIL: no line saying the resume resharded"; exit 1; }
python3 - "$T/ref/metrics.jsonl" "$T/one/metrics.jsonl" <<'PY' || exit 1
import json, sys
def losses(path):
    out = {}
    for line in open(path):
        j = json.loads(line)
        if j.get("kind") == "step":
            out[j["step"]] = j["train_loss"]
    return out
ref, one = losses(sys.argv[1]), losses(sys.argv[2])
steps = range(21, 61)
if any(s not in ref or s not in one for s in steps):
    sys.exit("FAIL: step lines 21..60 missing")
a = sum(ref[s] for s in steps) / len(steps)
b = sum(one[s] for s in steps) / len(steps)
print(f"mean train loss of steps 21..60: 2 ranks {a:.5f}, resumed on 1 rank {b:.5f}")
if abs(a - b) > 0.02 * a:
    sys.exit("FAIL: more than 2% apart")
PY

cp -r "$T/ref" "$T/missing"
rm "$T/missing/checkpoints/step-000000000040/rank-00001.ckpt"
mpi 1 "$LOOM" train --resume "$T/missing/checkpoints/step-000000000040" >"$T/missing.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -q "rank-00001.ckpt" "$T/missing.log" ||
  { cat "$T/missing.log"; echo "FAIL: exit $rc, expected 2 naming rank-00001.ckpt"; exit 1; }
echo "PASS"
