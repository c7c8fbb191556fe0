#!/usr/bin/env bash
# comm.algorithm = "two-level" under mpirun -np 4 with machines of 2 ranks faked
# (comm.ranks_per_node = 2): the allreduce sums like the flat ring; with 3 ranks (machines of
# 2 and 1) every rank refuses at the start, naming the layout. Then a short `loom train` of 4
# ranks with two-level and with the ring: both run, and each says which algorithm it runs
# (two-level sharding the optimizer); and with codec = "onebit" two-level, which says the codec
# runs across machines only.
# Usage: mpi_two_level_test.sh path/to/loom (the MPI check executable is beside it or in the
# build tree's tests/comm/mpi/).
# Skipped (exit 77) without an MPI build.
set -uo pipefail
loom=$1
check="$(dirname "$loom")/loom_comm_mpi_check"
[ -x "$check" ] || check="$(dirname "$loom")/tests/comm/mpi/loom_comm_mpi_check"
if [ ! -x "$check" ] || ! command -v mpirun >/dev/null; then echo "SKIP: no MPI build"; exit 77; fi
mpirun=(timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none)
out=$(mktemp)
dir=$(mktemp -d)
trap 'rm -rf "$out" "$dir"' EXIT

"${mpirun[@]}" -np 4 "$check" two-level >"$out" 2>&1
rc=$?
cat "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: two-level check exit code $rc"; exit 1; }
grep -q "^ok: two-level, 4 ranks, 0 failures" "$out" || { echo "FAIL: two-level sums"; exit 1; }

"${mpirun[@]}" -np 3 "$check" two-level-uneven >"$out" 2>&1
rc=$?
cat "$out"
[ "$rc" -ne 0 ] || { echo "FAIL: uneven machines were not refused"; exit 1; }
grep -q "2 machines with 2, 1 ranks" "$out" || { echo "FAIL: no message naming the layout"; exit 1; }
grep -q "failures" "$out" && { echo "FAIL: an uneven layout ran collectives"; exit 1; }

data=/usr/share/datasets/fashion-mnist
if ! ls "$data"/train-images-idx3-ubyte* >/dev/null 2>&1; then echo "SKIP: no Fashion-MNIST in $data (the training half of this test)"; exit 77; fi
for algo in ring two-level; do
  "${mpirun[@]}" -np 4 "$loom" train --set max_steps=3 --set eval=false --set "mlp.hidden=[64]" \
    --set progress=none --set comm.algorithm="$algo" --set comm.ranks_per_node=2 \
    --set output.dir="$dir/$algo" --force >"$dir/$algo.log" 2>&1 ||
    { cat "$dir/$algo.log"; echo "FAIL: training with comm.algorithm = $algo"; exit 1; }
done
grep -q "sync: allreduce over mpi (4 workers, two-level (2 machines x 2 ranks))" "$dir/two-level.log" ||
  { cat "$dir/two-level.log"; echo "FAIL: the strategy does not say it runs two-level"; exit 1; }
grep -q "sync: allreduce over mpi (4 workers, comm.algorithm ring)" "$dir/ring.log" ||
  { cat "$dir/ring.log"; echo "FAIL: the strategy does not say it runs the ring"; exit 1; }
grep -q "optimizer sharded (two-level)" "$dir/two-level.log" ||
  { cat "$dir/two-level.log"; echo "FAIL: two-level does not shard the optimizer"; exit 1; }
# A codec two-level: fp32 inside the faked machines, 1-bit across them.
"${mpirun[@]}" -np 4 "$loom" train --set max_steps=3 --set eval=false --set "mlp.hidden=[64]" \
  --set progress=none --set comm.algorithm=two-level --set comm.ranks_per_node=2 \
  --set codec=onebit --set output.dir="$dir/onebit" --force >"$dir/onebit.log" 2>&1 ||
  { cat "$dir/onebit.log"; echo "FAIL: training with codec onebit two-level"; exit 1; }
grep -q "two-level (2 machines x 2 ranks), codec across machines only" "$dir/onebit.log" ||
  { cat "$dir/onebit.log"; echo "FAIL: the codec does not run two-level"; exit 1; }
echo "ok"
