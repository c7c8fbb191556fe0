#!/usr/bin/env bash
# The reliability figures (docs/reliability.md), in a few minutes:
#  A. kill -9 at random moments while checkpoints are being written (thread transport, 2
#     workers, a checkpoint every step of a model whose files take a while to write), N times:
#     after each kill the newest complete checkpoint loads and `loom train --resume` finishes
#     with the parameters of an uninterrupted run (params_fnv1a64 in summary.json).
#  B. kill -9 of rank 1 of 2 (mpirun, MPI transport) mid-epoch: how long mpirun takes to exit,
#     its exit code and the message naming the rank; then `mpirun loom train --resume` finishes
#     with bitwise the parameters of an uninterrupted MPI run.
# Usage: bench/reliability.sh [path/to/loom]   (LOOM_KILLS=20 kills in A)
set -uo pipefail
LOOM=$(realpath "${1:-build/loom}")
KILLS=${LOOM_KILLS:-20}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
now() { date +%s.%N; }
began=$(now)
hash_of() { grep -o '"params_fnv1a64": *"[0-9a-f]*"' "$1/summary.json" 2>/dev/null | grep -o '[0-9a-f]\{16\}'; }

# ---------------------------------------------------------------- A: kills during checkpoints
# 2 workers x batch 64 (468 steps per epoch), an MLP of 1.9 M parameters (Adam: a 7.5 MB
# train.ckpt and two 7.5 MB rank files per checkpoint, each fsynced), a checkpoint every step:
# most of the wall time is spent writing checkpoints, so most kills land inside a write.
A=(--set workers=2 --set batch=64 --set max_steps=24 --set epochs=1 --set eval=false
   --set progress=none --set log.level=info --set "mlp.hidden=[1024,1024]"
   --set optim.name=adam --set optim.lr=0.001 --set train.checkpoint_every=1
   --set train.checkpoint_keep=2)
echo "== A: kill -9 during checkpoint writing, $KILLS times"
"$LOOM" train "${A[@]}" --set output.dir="$T/a_ref" >"$T/a_ref.log" 2>&1 ||
  { echo "reference run failed:"; tail "$T/a_ref.log"; exit 1; }
ref=$(hash_of "$T/a_ref")
echo "uninterrupted: params_fnv1a64 $ref"
ok=0 inside=0 fails=()
for i in $(seq "$KILLS"); do
  out="$T/a$i"
  "$LOOM" train "${A[@]}" --set output.dir="$out" >"$out.log" 2>&1 &
  pid=$!
  # Wait for the first complete checkpoint, then kill at a random moment 0-1.5 s later.
  for _ in $(seq 600); do compgen -G "$out/checkpoints/step-*[0-9]" >/dev/null && break; sleep 0.02; done
  sleep "$(awk -v r=$RANDOM 'BEGIN{printf "%.3f", r / 32767 * 1.5}')"
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  rc=$?
  # A .partial directory or a .tmp file left behind: the kill landed inside a write.
  left=$(find "$out/checkpoints" -name '*.partial' -o -name '*.tmp.*' 2>/dev/null | head -1)
  [ -n "$left" ] && inside=$((inside + 1))
  newest=$(ls -d "$out"/checkpoints/step-*[0-9] 2>/dev/null | sort | tail -1)
  "$LOOM" train --resume "$out" >"$out.resume.log" 2>&1
  rrc=$?
  got=$(hash_of "$out")
  loaded=$(grep -o "resumed from [^:]*" "$out.resume.log" | head -1 | sed 's/resumed from //')
  why=""
  [ "$rc" -eq 137 ] || why+=" killed run exited $rc (finished before the kill?)"
  [ "$rrc" -eq 0 ] || why+=" resume exited $rrc"
  [ "$loaded" = "$newest" ] || why+=" loaded '$loaded', newest complete is '$newest'"
  grep -q "skipping checkpoint" "$out.resume.log" && why+=" a complete checkpoint failed to load"
  [ "$got" = "$ref" ] || why+=" params $got != $ref"
  step=${newest##*step-}
  printf "  kill %2d: newest complete step %d, %s, resumed: %s\n" "$i" "$((10#${step:-0}))" \
    "$([ -n "$left" ] && echo "inside a write (${left##*/} left)" || echo "between writes")" \
    "$([ -z "$why" ] && echo ok || echo "FAIL:$why")"
  if [ -z "$why" ]; then ok=$((ok + 1)); else fails+=("$i:$why"); tail -5 "$out.resume.log"; fi
  rm -rf "$out"
done
echo "A: newest complete checkpoint loaded and resumed to the uninterrupted bits: $ok/$KILLS" \
     "(kills inside a checkpoint write: $inside/$KILLS)"

# ---------------------------------------------------------------- B: kill -9 of one MPI rank
echo "== B: kill -9 of rank 1 of 2 (mpirun, MPI transport) mid-epoch"
if ! command -v mpirun >/dev/null || ! "$LOOM" --version | grep -q "mpi=yes"; then
  echo "B: skipped (no mpirun or loom built without MPI)"
  [ "$ok" -eq "$KILLS" ]
  exit
fi
# 468 steps per epoch; 400 steps, a checkpoint every 20; the loader throttled so a step takes
# at least ~10 ms (the kill lands mid-epoch however fast the machine).
B=(--set batch=64 --set max_steps=400 --set epochs=1 --set eval=false --set progress=none
   --set log.level=warn --set "mlp.hidden=[256,128]" --set train.checkpoint_every=20
   --set data.throttle_mbps=20)
MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2)
cat >"$T/rank.sh" <<SH
#!/usr/bin/env bash
echo \$\$ > "$T/rank\$OMPI_COMM_WORLD_RANK.pid"
exec "$LOOM" "\$@"
SH
chmod +x "$T/rank.sh"
"${MPI[@]}" "$LOOM" train "${B[@]}" --set output.dir="$T/b_ref" >"$T/b_ref.log" 2>&1 ||
  { echo "reference MPI run failed:"; tail "$T/b_ref.log"; exit 1; }
bref=$(hash_of "$T/b_ref")
rm -f "$T"/rank*.pid
"${MPI[@]}" "$T/rank.sh" train "${B[@]}" --set output.dir="$T/b" >"$T/b.log" 2>&1 &
job=$!
for _ in $(seq 1500); do compgen -G "$T/b/checkpoints/step-000000000040" >/dev/null && break; sleep 0.02; done
victim=$(cat "$T/rank1.pid" 2>/dev/null)
t0=$(now)
kill -9 "$victim"
wait "$job"
brc=$?
secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN{printf "%.2f", b - a}')
msg=$(grep -m1 -E "rank 1|process rank 1" "$T/b.log")
newest=$(ls -d "$T"/b/checkpoints/step-*[0-9] | sort | tail -1)
echo "B: killed rank 1 (pid $victim) after ${newest##*/}: mpirun exited $brc after $secs s"
echo "B: message: ${msg:-<none naming rank 1>}"
"${MPI[@]}" "$LOOM" train --resume "$T/b" >"$T/b_resume.log" 2>&1
rrc=$?
got=$(hash_of "$T/b")
echo "B: resume exited $rrc; params_fnv1a64 resumed $got, uninterrupted $bref:" \
     "$([ "$got" = "$bref" ] && echo bitwise equal || echo DIFFERENT)"
bok=0
if [ "$brc" -ne 0 ] && awk -v s="$secs" 'BEGIN{exit !(s <= 30)}' && [ -n "$msg" ] &&
   [ "$rrc" -eq 0 ] && [ "$got" = "$bref" ]; then bok=1; fi
echo "== summary: A $ok/$KILLS resumed exactly ($inside inside a write); B $([ $bok = 1 ] && echo ok || echo FAIL);" \
     "$(awk -v a="$began" -v b="$(now)" 'BEGIN{printf "%.0f", b - a}') s in all"
[ "$ok" -eq "$KILLS" ] && [ "$bok" = 1 ]
