#!/usr/bin/env bash
# `mpirun -np 2 loom train` trains to the same bits as `loom train --set workers=2` (threads),
# with one TensorBoard event file and one rank's progress lines (progress = "auto" under a
# launcher), and ranks started with different configs stop at start naming the rank.
set -euo pipefail
LOOM=${1:?usage: mpi_train_test.sh path/to/loom}
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed"; exit 77; }
"$LOOM" --version | grep -q "mpi=yes" || { echo "SKIP: this loom was built without MPI"; exit 77; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
COMMON=(--set max_steps=30 --set epochs=1 --set eval=false --set progress=none --set log.level=warn
        --set "mlp.hidden=[128,64]")
"$LOOM" train "${COMMON[@]}" --set workers=2 --set output.dir="$T/thread" >/dev/null
mpirun --allow-run-as-root --oversubscribe -np 2 "$LOOM" train "${COMMON[@]}" \
  --set progress=auto --set output.dir="$T/mpi" >/dev/null 2>"$T/mpi.err"
a=$(grep params_fnv1a64 "$T/thread/summary.json"); b=$(grep params_fnv1a64 "$T/mpi/summary.json")
echo "thread: $a"; echo "mpi:    $b"
[ "$a" = "$b" ] || { echo "FAIL: MPI and thread transports trained different parameters"; exit 1; }
[ "$(ls "$T/mpi/tb" | wc -l)" = 1 ] || { echo "FAIL: tb/ holds $(ls "$T/mpi/tb")"; exit 1; }
[ "$(grep -c "epoch 1/1 100%" "$T/mpi.err")" = 1 ] && ! grep -q $'\r' "$T/mpi.err" ||
  { cat "$T/mpi.err"; echo "FAIL: not one rank's plain progress lines"; exit 1; }

# Different configs on the two ranks: a clear error naming rank 1, non-zero exit, no hang.
cat > "$T/differ.sh" <<SH
#!/usr/bin/env bash
lr=0.05; [ "\$OMPI_COMM_WORLD_RANK" = 1 ] && lr=0.1
exec "$LOOM" train ${COMMON[*]} --set optim.lr=\$lr --set output.dir=
SH
chmod +x "$T/differ.sh"
set +e
out=$(timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 "$T/differ.sh" 2>&1); rc=$?
set -e
grep -m1 "different config" <<< "$out" || { echo "FAIL: no message naming the differing rank (rc=$rc)"; echo "$out"; exit 1; }
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "FAIL: rc=$rc"; exit 1; }
echo "PASS"
