#!/usr/bin/env bash
# MPI ranks that pass different sizes to one allreduce (the node's shared memory path): every
# rank exits non-zero naming the two counts, never reads past a buffer or hangs.
# Usage: mpi_size_mismatch_test.sh path/to/loom (the MPI check executable lives beside it).
# Skipped (exit 77) when loom was built without MPI.
set -uo pipefail
check="$(dirname "$1")/loom_comm_mpi_check"
[ -x "$check" ] || check="$(dirname "$1")/tests/comm/mpi/loom_comm_mpi_check"
if [ ! -x "$check" ] || ! command -v mpirun >/dev/null; then echo "SKIP: no MPI build"; exit 77; fi
out=$(mktemp)
timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 "$check" mismatch >"$out" 2>&1
rc=$?
cat "$out"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { echo "FAIL: exit code $rc"; exit 1; }
grep -q "allreduce: rank [01] passed 400[04] bytes but rank [01] passed 400[04]" "$out" ||
  { echo "FAIL: no message naming the counts"; exit 1; }
echo "ok: rc=$rc"
rm -f "$out"
