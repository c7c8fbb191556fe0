#!/usr/bin/env bash
# A rank that stops answering under mpirun: the others exit non-zero (3) within the timeout
# plus a grace, naming it. Usage: mpi_timeout_test.sh path/to/loom (the MPI check executable
# lives beside it or under tests/comm/mpi/). Skipped (exit 77) when loom was built without MPI.
set -uo pipefail
check="$(dirname "$1")/loom_comm_mpi_check"
[ -x "$check" ] || check="$(dirname "$1")/tests/comm/mpi/loom_comm_mpi_check"
if [ ! -x "$check" ] || ! command -v mpirun >/dev/null; then echo "SKIP: no MPI build"; exit 77; fi
out=$(mktemp)
start=$(date +%s)
timeout 60 mpirun --allow-run-as-root --oversubscribe -np 3 "$check" silent 1 1.0 >"$out" 2>&1
rc=$?
secs=$(( $(date +%s) - start ))
cat "$out"
grep -q "rank 1 stopped answering" "$out" || { echo "FAIL: no message naming rank 1"; exit 1; }
[ "$rc" -ne 0 ] || { echo "FAIL: exit code 0"; exit 1; }
[ "$secs" -lt 15 ] || { echo "FAIL: took ${secs}s"; exit 1; }
echo "ok: rc=$rc in ${secs}s"
