#!/usr/bin/env bash
# The parameter server on dedicated MPI ranks (ps.placement = "ranks"): `mpirun -np 3` runs 2
# training ranks and 1 server rank, and trains to the same bits as 2 worker threads with the
# server as a thread; then a server rank killed with -9 makes the run exit non-zero, naming
# it, well within the timeout. Usage: ps_mpi_test.sh path/to/loom
set -euo pipefail
LOOM=${1:?usage: ps_mpi_test.sh path/to/loom}
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed"; exit 77; }
"$LOOM" --version | grep -q "mpi=yes" || { echo "SKIP: this loom was built without MPI"; exit 77; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
COMMON=(--set max_steps=30 --set epochs=1 --set eval=false --set progress=none --set log.level=warn
        --set "mlp.hidden=[128,64]" --set sync=ps --set ps.staleness=1 --set ps.exact_delay=true)
"$LOOM" train "${COMMON[@]}" --set workers=2 --set output.dir="$T/thread" >/dev/null
timeout 120 "${MPIRUN[@]}" -np 3 "$LOOM" train "${COMMON[@]}" --set ps.placement=ranks \
  --set output.dir="$T/mpi" >/dev/null
a=$(grep -o '"params_fnv1a64": *"[0-9a-f]*"' "$T/thread/summary.json")
b=$(grep -o '"params_fnv1a64": *"[0-9a-f]*"' "$T/mpi/summary.json")
w=$(grep -o '"workers": *[0-9]*' "$T/mpi/summary.json")
echo "threads: $a"; echo "mpi:     $b ($w)"
[ "$a" = "$b" ] || { echo "FAIL: server ranks and server threads trained different parameters"; exit 1; }
[ "$w" = '"workers": 2' ] || { echo "FAIL: expected 2 training ranks, got $w"; exit 1; }

# Kill the server rank (rank 2) in the middle of a long run: every rank must stop, non-zero,
# with a message naming rank 2, well before the end (comm.timeout_s = 10 is the backstop).
cat > "$T/rank.sh" <<SH
#!/usr/bin/env bash
[ "\$OMPI_COMM_WORLD_RANK" = 2 ] && echo \$\$ > "$T/server.pid"
exec "$LOOM" train --set epochs=50 --set eval=false --set progress=none --set log.level=warn \
  --set "mlp.hidden=[128,64]" --set sync=ps --set ps.placement=ranks --set comm.timeout_s=10 \
  --set output.dir=
SH
chmod +x "$T/rank.sh"
set +e
timeout 120 "${MPIRUN[@]}" -np 3 "$T/rank.sh" >"$T/out" 2>&1 &
job=$!
for _ in $(seq 300); do [ -s "$T/server.pid" ] && break; sleep 0.1; done
[ -s "$T/server.pid" ] || { echo "FAIL: the server rank never started"; kill "$job"; exit 1; }
sleep 4
start=$(date +%s)
kill -9 "$(cat "$T/server.pid")"
wait "$job"; rc=$?
set -e
secs=$(( $(date +%s) - start ))
tail -5 "$T/out"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { echo "FAIL: rc=$rc"; exit 1; }
[ "$secs" -le 30 ] || { echo "FAIL: took ${secs}s to stop"; exit 1; }
grep -Eq "rank 2" "$T/out" || { echo "FAIL: no message naming rank 2"; exit 1; }
echo "PASS (killed server noticed in ${secs}s, rc=$rc)"
