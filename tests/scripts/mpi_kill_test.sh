#!/usr/bin/env bash
# kill -9 of one MPI rank in the middle of allreduces: the survivor side must exit non-zero
# within 30 s with a message naming the lost rank (Open MPI's mpirun notices the death and
# names the rank itself; loom's own timeout is the backstop). Usage: mpi_kill_test.sh path/to/loom
set -uo pipefail
check="$(dirname "$1")/loom_comm_mpi_check"
[ -x "$check" ] || check="$(dirname "$1")/tests/comm/mpi/loom_comm_mpi_check"
if [ ! -x "$check" ] || ! command -v mpirun >/dev/null; then echo "SKIP: no MPI build"; exit 77; fi
dir=$(mktemp -d)
out="$dir/out"
timeout 90 mpirun --allow-run-as-root --oversubscribe -np 2 "$check" loop 60 "$dir" >"$out" 2>&1 &
job=$!
for _ in $(seq 100); do [ -s "$dir/rank1.pid" ] && break; sleep 0.1; done
[ -s "$dir/rank1.pid" ] || { echo "FAIL: rank 1 never started"; kill "$job"; exit 1; }
sleep 0.5
victim=$(cat "$dir/rank1.pid")
start=$(date +%s)
kill -9 "$victim"
wait "$job"
rc=$?
secs=$(( $(date +%s) - start ))
cat "$out"
[ "$rc" -ne 0 ] || { echo "FAIL: exit code 0"; exit 1; }
[ "$secs" -le 30 ] || { echo "FAIL: took ${secs}s"; exit 1; }
grep -Eq "rank 1|process rank 1" "$out" || { echo "FAIL: no message naming rank 1"; exit 1; }
echo "ok: rc=$rc in ${secs}s"
rm -rf "$dir"
