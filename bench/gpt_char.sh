#!/bin/bash
# bench/gpt_char.sh - the zoo's gpt-char on Debian's fortunes against the PyTorch peer on the same
# network, recipe, token shards and validation windows (bench/peers/torch_gpt_char.py); the
# recipe is docs/models.md's "gpt-char against PyTorch".
#
#   bench/gpt_char.sh loss    [--seeds "0 1 2"] [--steps 1700]  # validation bits/byte per seed
#   bench/gpt_char.sh codecs  [--seed 0] [--steps 1700]          # 2 workers: fp32, int8, onebit,
#                             [--configs "fp32 int8 ..."]        #   powersgd, sync = bmuf,
#                                                                #   onebit_adam (1-bit Adam)
#   bench/gpt_char.sh speed   [--steps 30] [--rounds 3]         # tokens/s at 1 thread
#   bench/gpt_char.sh scaling [--steps 60]                      # 2 workers vs free communication
#   bench/gpt_char.sh ddp     [--steps 60] [--rounds 3]         # 2 workers vs PyTorch DDP
#   bench/gpt_char.sh words   --runs "DIR ..."                  # sampled words of trained runs
#   common: [--data DIR] (shards from scripts/fortunes-shards; made in a temporary folder if
#           absent) [--lr 0.001] [--keep DIR] [--temperatures "0.8 0.7"] [--samples 8]
#
# loss: for each seed, loom (2 workers x batch 16) and PyTorch (batch 32, 1 thread) at once; then the means and loom - PyTorch, the add-one byte bigram on the same
#   validation windows, and the sampled words (below) of every seed's loom run.
# words: of the words in 1,000 characters sampled from a run (`loom sample --prompt "The "
#   --length 1000`, sampling seeds 0..SAMPLES-1 at each temperature), the share that occur in
#   the training text, per run and over all runs. One 1,000-character sample holds about 190
#   words, so a single sample's share moves by several points from one sampling seed to the next.
# codecs: the same recipe with 2 workers per configuration: validation bits/byte, its
#   difference from fp32 and the bytes a worker sent per step (metrics.jsonl's epoch lines).
# speed: loom (1 worker, 1 thread, batch 32) and every PyTorch peer (1 thread; 1.x with
#   nn.MultiheadAttention, 2.x with scaled_dot_product_attention and fused AdamW, eager and
#   torch.compile), --steps each, no evaluation, taking turns --rounds times; prints each one's
#   best rate and loom's ratio to each and to the fastest.
# scaling: tokens/s of two 1-worker runs at once (batch 16 each: nothing exchanged, the most 2
#   workers could reach) and of one 2-worker run (2 x 16).
# ddp: loom with 2 workers (2 x 16, 1 thread each) against the peer under DistributedDataParallel
#   (gloo over the loopback, 2 processes x 1 thread, 16 windows each) with every PyTorch found
#   (1.x with nn.MultiheadAttention, 2.x with scaled_dot_product_attention), taking turns
#   --rounds times; each keeps its best, and the ratio is against the fastest.
# Speed figures depend on what else runs: every mode prints /proc/loadavg when it starts and ends.
# One JSON object per result line ({"bench":"gpt_char",...}).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
LOOM=${LOOM:-$root/build/loom}
PY=${LOOM_PYTHON:-$root/.venv/bin/python}
[ -x "$PY" ] || PY=/usr/bin/python3
PEER=$here/peers/torch_gpt_char.py
FIG=$here/peers/gpt_char_figures.py
MODE=${1:-loss}
shift || true
case $MODE in -h|--help) sed -n '2,36p' "$0"; exit 0 ;; esac
SEEDS="0 1 2" SEED=0 STEPS= ROUNDS=3 LR=0.001 DATA= KEEP= CONFIGS="fp32 int8 onebit powersgd bmuf onebit_adam"
TEMPERATURES="0.8 0.7" SAMPLES=8 RUNS=
while [ $# -gt 0 ]; do
  case $1 in
    --seeds) SEEDS=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --lr) LR=$2; shift 2 ;;
    --configs) CONFIGS=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    --temperatures) TEMPERATURES=$2; shift 2 ;;
    --samples) SAMPLES=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    -h|--help) sed -n '2,36p' "$0"; exit 0 ;;
    *) echo "gpt_char.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$LOOM" ] || { echo "gpt_char.sh: no loom at $LOOM (run scripts/build)" >&2; exit 2; }
case $MODE in
  loss|codecs) STEPS=${STEPS:-1700} ;;
  speed) STEPS=${STEPS:-30} ;;
  scaling|ddp) STEPS=${STEPS:-60} ;;
  words) [ -n "$RUNS" ] || { echo "gpt_char.sh: words needs --runs \"DIR ...\"" >&2; exit 2; } ;;
  *) echo "gpt_char.sh: mode is loss, codecs, speed, scaling, ddp or words, not '$MODE'" >&2; exit 2 ;;
esac
work=${KEEP:-$(mktemp -d /tmp/loom_gpt_char.XXXXXX)}
mkdir -p "$work"
[ -n "$KEEP" ] || trap 'rm -rf "$work"' EXIT
if [ -z "$DATA" ]; then
  DATA=$work/data
  LOOM=$LOOM "$root/scripts/fortunes-shards" "$DATA" bytes > "$work/shards.log"
fi
for f in train.shard valid.shard train.txt; do
  [ -f "$DATA/$f" ] || { echo "gpt_char.sh: $DATA/$f is missing (scripts/fortunes-shards DIR)" >&2; exit 2; }
done
echo "load at start: $(cat /proc/loadavg)"
trap 'echo "load at end: $(cat /proc/loadavg)"; [ -n "$KEEP" ] || rm -rf "$work"' EXIT

# The recipe is configs/gpt_char.toml (docs/models.md); only the data and the lr come from here.
recipe=("$root/configs/gpt_char.toml" --set data.train_shards="$DATA/train.shard"
        --set data.validation="$DATA/valid.shard" --set optim.lr="$LR" --set progress=none)
peer_recipe=(--train "$DATA/train.shard" --valid "$DATA/valid.shard" --context 128 --batch 32
             --lr "$LR" --beta1 0.9 --beta2 0.999 --eps 1e-8 --weight-decay 0.01
             --warmup-epochs 0.05)

loom_run() {  # $1 = output dir, rest = --set args; prints "val_bits tokens_per_s"
  local dir=$1; shift
  "$LOOM" train "${recipe[@]}" --set output.dir="$dir" --force "$@" > "$dir.log" 2>&1 ||
    { cat "$dir.log" >&2; exit 1; }
  python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(s['val_bits_per_byte'], s['tokens_per_s'])" "$dir/summary.json"
}
loom_speed() {  # $1 = output dir, $2 = workers, $3 = batch per worker; prints tokens/s
  local l
  read -r _ l < <(loom_run "$1" --set workers="$2" --set threads=1 --set batch="$3" \
                    --set max_steps="$STEPS" --set eval=false --set seed="$SEED")
  echo "$l"
}
bytes_per_step() {  # bytes a worker sent per step, from the epoch lines
  python3 -c "
import json, sys
e = [json.loads(l) for l in open(sys.argv[1]) if '\"kind\":\"epoch\"' in l]
print(sum(x['bytes_sent'] for x in e) / max(1, sum(x['steps'] for x in e)))" "$1/metrics.jsonl"
}
sampled_words() {  # run dirs; prints a line and a JSON object per temperature
  local t r k found total f n all_found all_total
  for t in $TEMPERATURES; do
    all_found=0 all_total=0
    for r in "$@"; do
      found=0 total=0
      for ((k = 0; k < SAMPLES; k++)); do
        "$LOOM" sample "$r" --prompt "The " --length 1000 --temperature "$t" --seed "$k" \
          > "$work/sample.txt"
        read -r f n < <("$PY" "$FIG" words "$DATA/train.txt" "$work/sample.txt")
        found=$((found + f)) total=$((total + n))
      done
      echo "temperature $t, $r: $found of $total sampled words in the training text" \
        "($(awk "BEGIN{printf \"%.1f\", 100 * $found / ($total ? $total : 1)}")%)"
      all_found=$((all_found + found)) all_total=$((all_total + total))
    done
    echo "temperature $t, all runs, $SAMPLES samples each: $all_found of $all_total" \
      "($(awk "BEGIN{printf \"%.1f\", 100 * $all_found / ($all_total ? $all_total : 1)}")%)"
    echo "{\"bench\":\"gpt_char\",\"mode\":\"words\",\"temperature\":$t,\"runs\":$#,\"samples\":$SAMPLES,\"found\":$all_found,\"words\":$all_total}"
  done
}
peer_run() {  # peer args; prints "val_bits tokens_per_s" (the python: $RUN_PY, else $PY)
  "${RUN_PY:-$PY}" "$PEER" "${peer_recipe[@]}" "$@" > "$work/torch.log" 2>&1 || { cat "$work/torch.log" >&2; exit 1; }
  sed -n 's/^RESULT .*val_bits_per_byte=\([0-9.na]*\) tokens_per_s=\([0-9.]*\).*/\1 \2/p' "$work/torch.log"
}

# shellcheck source=bench/peer_lib.sh
. "$here/peer_lib.sh"
case $MODE in
  loss)
    : > "$work/loss.txt"
    for s in $SEEDS; do
      loom_run "$work/loom$s" --set workers=2 --set batch=16 --set max_steps="$STEPS" \
        --set seed="$s" > "$work/loom$s.txt" &
      read -r tb tt < <(peer_run --threads 1 --steps "$STEPS" --seed "$s")
      wait
      read -r lb lt < "$work/loom$s.txt"
      echo "seed $s: loom $lb bits/byte ($lt tokens/s), PyTorch $tb ($tt tokens/s)"
      echo "{\"bench\":\"gpt_char\",\"mode\":\"loss\",\"steps\":$STEPS,\"seed\":$s,\"loom_val_bits_per_byte\":$lb,\"torch_val_bits_per_byte\":$tb}"
      echo "$lb $tb" >> "$work/loss.txt"
    done
    big=$("$PY" "$FIG" bigram "$DATA/train.shard" "$DATA/valid.shard" 128)
    python3 - "$work/loss.txt" "$big" "$STEPS" <<'PY'
import json, statistics, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
big, steps = float(sys.argv[2]), int(sys.argv[3])
lm, tm = statistics.mean(r[0] for r in rows), statistics.mean(r[1] for r in rows)
print(f"{steps} steps, {len(rows)} seeds: mean loom {lm:.4f} bits/byte, PyTorch {tm:.4f}: "
      f"loom - PyTorch {lm - tm:+.4f}; bigram {big:.4f} (loom {big - lm:.2f} below it)")
print(json.dumps({"bench": "gpt_char", "mode": "loss_mean", "steps": steps, "seeds": len(rows),
                  "loom": lm, "torch": tm, "diff": lm - tm, "bigram": big}))
PY
    runs=()
    for s in $SEEDS; do runs+=("$work/loom$s"); done
    sampled_words "${runs[@]}"
    ;;
  words)
    # shellcheck disable=SC2086
    sampled_words $RUNS
    ;;
  codecs)
    base=
    for c in $CONFIGS; do
      case $c in
        bmuf) extra=(--set sync=bmuf) ;;
        onebit_adam) extra=(--set optim.name=onebit_adam) ;;  # 1-bit Adam's own exchange
        *) extra=(--set codec="$c") ;;
      esac
      read -r b t < <(loom_run "$work/$c" --set workers=2 --set batch=16 --set max_steps="$STEPS" \
                        --set seed="$SEED" "${extra[@]}")
      bps=$(bytes_per_step "$work/$c")
      [ "$c" != fp32 ] || base=$b
      python3 - "$c" "$b" "$base" "$bps" "$t" "$STEPS" "$SEED" <<'PY'
import json, sys
c, b, bps, t = sys.argv[1], float(sys.argv[2]), float(sys.argv[4]), float(sys.argv[5])
base = float(sys.argv[3]) if sys.argv[3] else None  # fp32 runs first when it is in --configs
d = f"{b - base:+.4f} vs fp32" if base is not None else "no fp32 run"
print(f"{c:9s} {b:.4f} bits/byte ({d}), {bps:,.0f} bytes sent per step, {t:.0f} tokens/s")
print(json.dumps({"bench": "gpt_char", "mode": "codecs", "config": c, "steps": int(sys.argv[6]),
                  "seed": int(sys.argv[7]), "val_bits_per_byte": b,
                  "diff_vs_fp32": None if base is None else b - base,
                  "bytes_per_step": bps, "tokens_per_s": t}))
PY
    done ;;
  speed)
    # Each PyTorch written as its users would: nn.MultiheadAttention on 1.x; on 2.x
    # scaled_dot_product_attention with fused AdamW, eager and compiled. Loom and the peers take
    # turns ROUNDS times; each keeps its best round, and the ratio is against the fastest peer.
    read -ra pys <<< "$(peer_pythons)"
    peer_variants=()
    for p in "${pys[@]}"; do
      v=$("$p" -c 'import torch; print(torch.__version__)')
      case $v in
        1.*) peer_variants+=("$p|$v|--style mha") ;;
        *) peer_variants+=("$p|$v sdpa|--style sdpa" "$p|$v sdpa compiled|--style sdpa --compile") ;;
      esac
    done
    results=()
    for r in $(seq 1 "$ROUNDS"); do
      results+=("loom=$(loom_speed "$work/speed" 1 32)")
      for pv in "${peer_variants[@]}"; do
        IFS='|' read -r p name flags <<< "$pv"
        # shellcheck disable=SC2086
        read -r _ t < <(RUN_PY=$p peer_run --threads 1 --steps "$STEPS" --seed "$SEED" --no-eval $flags)
        results+=("PyTorch $name=$t")
      done
    done
    python3 "$here/best_of_rounds.py" gpt_char speed "1 thread" tokens/s "$STEPS" "$ROUNDS" "${results[@]}"
    ;;
  scaling)
    common=(--set max_steps="$STEPS" --set threads=1 --set eval=false --set batch=16 --set workers=1)
    loom_run "$work/a" "${common[@]}" > "$work/a.txt" &
    read -r _ b < <(loom_run "$work/b" "${common[@]}")
    wait
    read -r _ a < "$work/a.txt"
    read -r _ two < <(loom_run "$work/c" "${common[@]}" --set workers=2)
    python3 - "$a" "$b" "$two" <<'PY'
import json, sys
a, b, two = map(float, sys.argv[1:])
print(f"two 1-worker runs at once {a:.0f} + {b:.0f} = {a + b:.0f} tokens/s; one 2-worker run "
      f"{two:.0f}: {two / (a + b):.2f} of free communication")
print(json.dumps({"bench": "gpt_char", "mode": "scaling", "together": a + b, "two_workers": two,
                  "of_ceiling": two / (a + b)}))
PY
    ;;
  ddp)
    read -ra pys <<< "$(peer_pythons)"
    results=()
    for r in $(seq 1 "$ROUNDS"); do
      results+=("loom=$(loom_speed "$work/ddp" 2 16)")
      for p in "${pys[@]}"; do
        v=$("$p" -c 'import torch; print(torch.__version__)')
        port=$(free_port)
        ddp=(--threads 1 --steps "$STEPS" --seed "$SEED" --no-eval --world 2 --master "127.0.0.1:$port")
        "$p" "$PEER" "${peer_recipe[@]}" "${ddp[@]}" --rank 1 > "$work/rank1.log" 2>&1 &
        rank1=$!
        RUN_PY=$p peer_run "${ddp[@]}" --rank 0 > "$work/rank0.txt" || { wait; exit 1; }
        wait "$rank1" || { cat "$work/rank1.log" >&2; exit 1; }
        read -r _ t < "$work/rank0.txt"
        results+=("PyTorch $v DDP=$t")
      done
    done
    python3 "$here/best_of_rounds.py" gpt_char ddp "2 workers x 1 thread" tokens/s "$STEPS" "$ROUNDS" "${results[@]}"
    ;;
esac
