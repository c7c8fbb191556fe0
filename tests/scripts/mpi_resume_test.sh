#!/usr/bin/env bash
# kill -9 of rank 1 of `mpirun -np 2 loom train` mid-epoch: mpirun exits non-zero within 30 s
# naming rank 1, and `mpirun loom train --resume DIR` then finishes with bitwise the parameters
# (params_fnv1a64 of summary.json) of an uninterrupted MPI run. The long form, with timings, is
# bench/reliability.sh. Usage: mpi_resume_test.sh path/to/loom
set -uo pipefail
LOOM=$(realpath "${1:?usage: mpi_resume_test.sh path/to/loom}")
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed"; exit 77; }
"$LOOM" --version | grep -q "mpi=yes" || { echo "SKIP: this loom was built without MPI"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
MPI=(timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2)
# 468 steps per epoch, 120 steps: all in epoch 1. The loader is throttled to 20 MB/s (200 kB per
# step and rank: >= 10 ms a step), so the run lasts over a second however fast the machine and
# the kill lands between the checkpoint at step 10 and the end.
ARGS=(--set batch=64 --set max_steps=120 --set epochs=1 --set eval=false --set progress=none
      --set log.level=warn --set "mlp.hidden=[32,16]" --set train.checkpoint_every=10
      --set data.throttle_mbps=20)
hash_of() { grep -o '"params_fnv1a64": *"[0-9a-f]*"' "$1/summary.json" 2>/dev/null; }

"${MPI[@]}" "$LOOM" train "${ARGS[@]}" --set output.dir="$T/ref" >"$T/ref.log" 2>&1 ||
  { cat "$T/ref.log"; echo "FAIL: the uninterrupted run failed"; exit 1; }

cat >"$T/rank.sh" <<SH
#!/usr/bin/env bash
echo \$\$ > "$T/rank\$OMPI_COMM_WORLD_RANK.pid"
exec "$LOOM" "\$@"
SH
chmod +x "$T/rank.sh"
"${MPI[@]}" "$T/rank.sh" train "${ARGS[@]}" --set output.dir="$T/run" >"$T/run.log" 2>&1 &
job=$!
for _ in $(seq 3000); do [ -d "$T/run/checkpoints/step-000000000010" ] && break; sleep 0.01; done
[ -d "$T/run/checkpoints/step-000000000010" ] && [ -s "$T/rank1.pid" ] ||
  { kill "$job"; cat "$T/run.log"; echo "FAIL: no checkpoint at step 10"; exit 1; }
start=$(date +%s)
kill -9 "$(cat "$T/rank1.pid")"
wait "$job"
rc=$?
secs=$(($(date +%s) - start))
[ "$rc" -ne 0 ] || { cat "$T/run.log"; echo "FAIL: mpirun exited 0 (the run ended before the kill?)"; exit 1; }
[ "$rc" -ne 124 ] && [ "$secs" -le 30 ] || { echo "FAIL: took ${secs}s (rc $rc)"; exit 1; }
grep -Eq "rank 1" "$T/run.log" || { cat "$T/run.log"; echo "FAIL: no message naming rank 1"; exit 1; }
echo "killed rank 1: mpirun exited $rc after ${secs}s: $(grep -m1 -E 'rank 1' "$T/run.log")"

"${MPI[@]}" "$LOOM" train --resume "$T/run" >"$T/resume.log" 2>&1 ||
  { cat "$T/resume.log"; echo "FAIL: resume failed"; exit 1; }
a=$(hash_of "$T/ref")
b=$(hash_of "$T/run")
echo "uninterrupted: $a"
echo "resumed:       $b"
[ -n "$a" ] && [ "$a" = "$b" ] || { echo "FAIL: the resumed run trained different parameters"; exit 1; }
echo "PASS"
