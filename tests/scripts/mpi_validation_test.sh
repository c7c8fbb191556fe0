#!/usr/bin/env bash
# MPI ranks each compute the validation split (data.validation) on their own, from the seed:
# `mpirun -np 2` trains to the same bits, the same per-epoch validation figures and the same
# best epoch as two threads, which share one split.
set -euo pipefail
LOOM=${1:?usage: mpi_validation_test.sh path/to/loom}
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed"; exit 77; }
"$LOOM" --version | grep -q "mpi=yes" || { echo "SKIP: this loom was built without MPI"; exit 77; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
COMMON=(--set epochs=2 --set batch=1024 --set progress=none --set log.level=warn
        --set "mlp.hidden=[64,32]" --set data.validation=0.1 --set train.keep_best=true)
"$LOOM" train "${COMMON[@]}" --set workers=2 --set output.dir="$T/thread" >/dev/null
mpirun --allow-run-as-root --oversubscribe -np 2 "$LOOM" train "${COMMON[@]}" \
  --set output.dir="$T/mpi" >/dev/null
for key in params_fnv1a64 val_acc val_loss best_epoch val_samples test_acc; do
  a=$(grep "\"$key\"" "$T/thread/summary.json"); b=$(grep "\"$key\"" "$T/mpi/summary.json")
  echo "thread: $a  mpi: $b"
  [ -n "$a" ] && [ "$a" = "$b" ] || { echo "FAIL: $key differs between MPI ranks and threads"; exit 1; }
done
grep -q '"val_samples": 6000' "$T/mpi/summary.json" || { echo "FAIL: no 6000-record split"; exit 1; }
echo "PASS"
