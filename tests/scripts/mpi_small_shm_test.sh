#!/usr/bin/env bash
# MPI ranks on one machine whose shared-window backing directory has too little room (an 8 MiB
# tmpfs, as a container's small /dev/shm): loom must see it, say so, and run every collective
# point to point, never hang in Open MPI's window creation. Usage: mpi_small_shm_test.sh
# path/to/loom (the MPI check executable lives beside it). Skipped (exit 77) without an MPI build
# or without the right to mount a tmpfs.
set -uo pipefail
check="$(dirname "$1")/loom_comm_mpi_check"
[ -x "$check" ] || check="$(dirname "$1")/tests/comm/mpi/loom_comm_mpi_check"
if [ ! -x "$check" ] || ! command -v mpirun >/dev/null; then echo "SKIP: no MPI build"; exit 77; fi
dir=$(mktemp -d)
if ! mount -t tmpfs -o size=8m tmpfs "$dir" 2>/dev/null; then
  rmdir "$dir"; echo "SKIP: cannot mount a tmpfs here"; exit 77
fi
trap 'umount "$dir"; rmdir "$dir"' EXIT
out=$(mktemp)
OMPI_MCA_osc_sm_backing_directory="$dir" timeout 60 mpirun --allow-run-as-root --oversubscribe \
  -x OMPI_MCA_osc_sm_backing_directory -np 2 "$check" collectives-no-room >"$out" 2>&1
rc=$?
cat "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: exit code $rc"; exit 1; }
grep -q "less than twice the smallest shared window" "$out" || { echo "FAIL: no message"; exit 1; }
grep -q "^ok: 2 ranks, 0 failures" "$out" || { echo "FAIL: collectives"; exit 1; }
echo "ok"
rm -f "$out"
