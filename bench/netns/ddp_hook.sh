#!/bin/bash
# bench/netns/ddp_hook.sh - PyTorch DistributedDataParallel on 2 processes with loom's
# communication hook (loom.torch.comm_hook, docs/python.md) against DDP's own fp32 allreduce:
# samples/s and test accuracy of the PyTorch MLP peer after the same epochs.
#
#   bench/netns/ddp_hook.sh [--python PY] [--epochs E] [--links "1gbit lo"]
#                           [--configs "fp32 fp16 int8 onebit"] [--repeats R]
#                           [--bucket-mb MB] [--first-bucket-mb MB]
#                           [--network mlp|gpt-char] [--data DIR] [--steps N] [--seed S]
#
# Links: a rate (1gbit, 100mbit, off) puts one rank in each of two network namespaces joined by
# a veth shaped with tbf (lib.sh), gloo over the veth; lo puts both ranks in one namespace on
# its loopback (the hook's own cost against DDP fp32, with the link out of the way). Configs:
# fp32 (DDP's allreduce), torch-fp16 (PyTorch's fp16_compress_hook), and the loom codecs fp16,
# bf16, int8, onebit, topk, powersgd through the hook, each with its defaults (CODEC-wN, e.g.
# onebit-w10: with comm_hook(warmup_steps=N), the first N steps summed exactly), and
# onebit-sgd-opt: no DDP and no hook, loom.torch.OnebitSGD exchanging the ranks' velocities
# itself (1-bit with momentum correction, loom's warm-up; onebit-sgd-opt-wN: N warm-up steps).
# Each run trains bench/peers/torch_mlp.py (MLP 784-1024-1024-10, batch 128 per rank, 1 thread per rank,
# Fashion-MNIST) for E epochs (default 1) and reads rank 0's RESULT line: the median over
# epochs of samples/s (training loop only, the slower rank's time), the final test accuracy and
# rank 0's training loss and accuracy over the last epoch (dropout on). --bucket-mb and
# --first-bucket-mb set DDP's buckets (bucket_cap_mb, default 25, and the first bucket,
# default 1) for every config; --seed S (default 0) the peer's initial weights and data
# order. With --repeats R the configs take turns R times and the median of the repeats is
# reported, with the load average before and after. Prints a table (each
# config's rate against fp32 DDP's on the same link, its accuracies against fp32's, and the
# hooks' cost on the loopback, where the link is out of the way) and one JSON object per line
# ({"bench":"ddp_hook",...}). Needs root (namespaces, tc), iproute2, python3-torch, the loom
# package in PY (default: the checkout's .venv, scripts/setup-python-package) and Debian's
# dataset-fashion-mnist. The namespaces are deleted on exit, whatever happens.
# --network gpt-char trains bench/peers/torch_gpt_char.py instead (gpt-char's recipe, 2 ranks x
# 16 windows, --steps N, default 1700; --data DIR from scripts/fortunes-shards DIR bytes):
# configs fp32 (DDP with AdamW) and onebit-adam-opt (no DDP: loom.torch.OnebitAdam exchanging
# itself; onebit-adam-opt-wN: N warm-up steps); the table's rate is tokens/s and its accuracy the
# validation bits/byte (lower is better).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
PY=${PY:-$root/.venv/bin/python}
EPOCHS=${EPOCHS:-1}
NETWORK=mlp
DATA=
STEPS=1700
SEED=0
REPEATS=${REPEATS:-1}
LINKS=${LINKS:-"1gbit lo"}
CONFIGS=${CONFIGS:-"fp32 fp16 int8 onebit"}
TIMEOUT=${TIMEOUT:-900}
BUCKET_MB=${BUCKET_MB:-25}
FIRST_BUCKET_MB=${FIRST_BUCKET_MB:-1}
while [ $# -gt 0 ]; do
  case $1 in
    --python) PY=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --network) NETWORK=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --links) LINKS=$2; shift 2 ;;
    --configs) CONFIGS=$2; shift 2 ;;
    --bucket-mb) BUCKET_MB=$2; shift 2 ;;
    --first-bucket-mb) FIRST_BUCKET_MB=$2; shift 2 ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "ddp_hook.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
hook_of() {  # config -> "hook warmup_steps optimizer" (CODEC-wN: warmup_steps = N)
  local name=$1 warm=0
  if [[ $1 =~ ^(.+)-w([0-9]+)$ ]]; then name=${BASH_REMATCH[1]} warm=${BASH_REMATCH[2]}; fi
  case $name in
    fp32) [ "$warm" = 0 ] && echo "none 0 sgd" ;;
    torch-fp16) [ "$warm" = 0 ] && echo "torch-fp16 0 sgd" ;;
    fp16|bf16|int8|onebit|topk|powersgd) echo "$name $warm sgd" ;;
    onebit-sgd-opt|onebit-adam-opt)
      local opt=onebit_sgd
      [ "$name" = onebit-sgd-opt ] || opt=onebit_adam
      if [[ $1 =~ -w[0-9]+$ ]]; then echo "none $warm $opt"; else echo "none - $opt"; fi ;;
    *) false ;;
  esac || { echo "ddp_hook.sh: unknown config '$1'" >&2; return 1; }
}
for c in $CONFIGS; do hook_of "$c" >/dev/null; done
case $NETWORK in
  mlp) ;;
  gpt-char)
    [ -f "$DATA/train.shard" ] && [ -f "$DATA/valid.shard" ] ||
      { echo "ddp_hook.sh: --network gpt-char needs --data DIR with train.shard and valid.shard (scripts/fortunes-shards DIR bytes)" >&2; exit 2; }
    for c in $CONFIGS; do
      case $(hook_of "$c") in "none 0 sgd"|*onebit_adam) ;;
        *) echo "ddp_hook.sh: --network gpt-char takes fp32 and onebit-adam-opt[-wN], not '$c'" >&2; exit 2 ;;
      esac
    done ;;
  *) echo "ddp_hook.sh: --network is mlp or gpt-char, not '$NETWORK'" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "ddp_hook.sh: needs root (network namespaces, tc)" >&2; exit 2; }
# Only loom's hooks need the loom package: DDP's own fp32 and fp16 run on any PyTorch (the
# newest from PyPI included, scripts/setup-bench).
needs_loom=false
for c in $CONFIGS; do case $(hook_of "$c") in "none 0 sgd"|"torch-fp16 0 sgd") ;; *) needs_loom=true ;; esac; done
if $needs_loom; then
  "$PY" -c "import torch, loom.torch" 2>/dev/null ||
    { echo "ddp_hook.sh: $PY cannot import torch and loom.torch (scripts/setup-python-package)" >&2; exit 2; }
else
  "$PY" -c "import torch" 2>/dev/null ||
    { echo "ddp_hook.sh: $PY cannot import torch (scripts/setup-bench)" >&2; exit 2; }
fi

# shellcheck source=bench/netns/lib.sh
. "$here/lib.sh"
netns_begin loom_ddp_hook
work=$NB_WORK
netns_up
port=29600

run_one() {  # link config repeat -> prints "samples_per_s test_acc train_loss train_acc"
  local link=$1 cfg=$2 out="$work/$1-$2-$3" hook warm optimizer ns0 ns1 if0 if1 master
  read -r hook warm optimizer < <(hook_of "$cfg")
  mkdir -p "$out"
  port=$((port + 1))  # a fresh port per run: no TIME_WAIT from the last one
  if [ "$link" = lo ]; then
    ns0=$NB_NS0 ns1=$NB_NS0 if0=lo if1=lo master=127.0.0.1:$port
  else
    ns0=$NB_NS0 ns1=$NB_NS1 if0=${NB_TAG}0 if1=${NB_TAG}1 master=$NB_IP0:$port
  fi
  local peer
  if [ "$NETWORK" = gpt-char ]; then
    [ "$optimizer" = sgd ] && optimizer=adamw
    peer=("$root/bench/peers/torch_gpt_char.py" --threads 1 --steps "$STEPS" --world 2
          --master "$master" --optimizer "$optimizer" --train "$DATA/train.shard"
          --valid "$DATA/valid.shard" --context 128 --batch 32 --lr 0.001 --beta1 0.9
          --beta2 0.999 --eps 1e-8 --weight-decay 0.01 --warmup-epochs 0.05)
  else
    peer=("$root/bench/peers/torch_mlp.py" --threads 1 --epochs "$EPOCHS" --world 2
          --master "$master" --hook "$hook" --optimizer "$optimizer"
          --bucket-mb "$BUCKET_MB" --first-bucket-mb "$FIRST_BUCKET_MB")
    [ "$optimizer" != sgd ] || peer+=(--hook-warmup "$warm")
  fi
  [ "$optimizer" = sgd ] || [ "$optimizer" = adamw ] || [ "$warm" = - ] ||
    peer+=(--optimizer-warmup "$warm")
  peer+=(--seed "$SEED")
  ip netns exec "$ns1" env GLOO_SOCKET_IFNAME="$if1" timeout "$TIMEOUT" \
    "$PY" "${peer[@]}" --rank 1 >"$out/rank1.log" 2>&1 &
  local other=$!
  local rc=0
  ip netns exec "$ns0" env GLOO_SOCKET_IFNAME="$if0" timeout "$TIMEOUT" \
    "$PY" "${peer[@]}" --rank 0 >"$out/rank0.log" 2>&1 || rc=$?
  wait "$other" || rc=$((rc + $?))
  local result
  result=$(grep '^RESULT' "$out/rank0.log" || true)
  if [ "$rc" != 0 ] || [ -z "$result" ]; then
    echo "ddp_hook.sh: $cfg on $link failed; last lines of its logs:" >&2
    tail -n 3 "$out/rank0.log" "$out/rank1.log" >&2 || true
    echo "nan nan nan nan"
    return
  fi
  if [ "$NETWORK" = gpt-char ]; then
    echo "$result" | sed -E 's/.*val_bits_per_byte=([0-9.na]+) tokens_per_s=([0-9.]+).*/\2 \1 nan nan/'
    return
  fi
  echo "$result" | sed -E 's/.*median_samples_per_s=([0-9.]+).*final_test_acc=([0-9.]+).*rank0_train_loss=([0-9.na]+) rank0_train_acc=([0-9.na]+).*/\1 \2 \3 \4/'
}

results="$work/results"
: >"$results"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for rep in $(seq "$REPEATS"); do
  for link in $LINKS; do
    if [ "$link" = lo ]; then netns_shape off; else netns_shape "$link"; fi
    for cfg in $CONFIGS; do
      read -r sps acc tloss tacc < <(run_one "$link" "$cfg" "$rep")
      echo "$link $cfg $sps $acc $tloss $tacc" >>"$results"
      printf '  %-6s %-10s %8s samples/s  test acc %s  train loss %s acc %s  (load %s)\n' \
        "$link" "$cfg" "$sps" "$acc" "$tloss" "$tacc" "$(cut -d' ' -f1 /proc/loadavg)" >&2
    done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

/usr/bin/python3 - "$results" "$EPOCHS" "$REPEATS" "$load_before" "$load_after" "$NETWORK" "$STEPS" \
  "$BUCKET_MB" "$FIRST_BUCKET_MB" "$SEED" <<'PY'
import json, math, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
epochs, repeats, load0, load1 = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
network, steps = sys.argv[6], int(sys.argv[7])
bucket_mb, first_mb = float(sys.argv[8]), float(sys.argv[9])
seed = int(sys.argv[10])
runs = {}
for link, cfg, *vals in rows:
    runs.setdefault((link, cfg), []).append([float(v) for v in vals])
def median(xs):
    xs = [x for x in xs if not math.isnan(x)]
    return statistics.median(xs) if xs else float("nan")
nan = float("nan")
# per (link, config): median samples/s, test accuracy, training loss, training accuracy
r = {k: [median([v[i] for v in vs]) for i in range(4)] for k, vs in runs.items()}
links = list(dict.fromkeys(x[0] for x in rows))
cfgs = list(dict.fromkeys(x[1] for x in rows))
if network == "mlp":
    what = f"MLP 784-1024-1024-10, batch 128/rank, {epochs} epoch(s)"
    rate, metric = "samples/s", "test acc"
else:  # rate is tokens/s and the metric validation bits/byte; no training figures
    what = f"gpt-char, 16 windows of 128 bytes/rank, {steps} steps"
    rate, metric = "tokens/s", "val bits"
print(f"DDP, 2 processes x 1 thread, {what}, "
      f"buckets {first_mb:g} MiB first, {bucket_mb:g} MiB cap; median of {repeats} run(s); "
      f"load average before {load0}, after {load1}")
print(f"{'link':<7} {'config':<18} {rate:>10} {'x fp32':>7} {metric:>9} "
      f"{'- fp32':>7} {'train acc':>9} {'- fp32':>7} {'train loss':>10}")
lines = []
for link in links:
    f32 = r.get((link, "fp32"), [nan] * 4)
    for cfg in cfgs:
        sps, acc, tloss, tacc = r[(link, cfg)]
        x = sps / f32[0] if f32[0] and not math.isnan(f32[0]) else nan
        print(f"{link:<7} {cfg:<18} {sps:>10.0f} {x:>7.2f} {acc:>9.4f} {acc - f32[1]:>+7.4f} "
              f"{tacc:>9.4f} {tacc - f32[3]:>+7.4f} {tloss:>10.4f}")
        j = {"bench": "ddp_hook", "network": network, "link": link, "config": cfg, "ranks": 2,
             "repeats": repeats, "seed": seed, "bucket_mb": bucket_mb, "first_bucket_mb": first_mb,
             "x_fp32": x, "load_before": load0, "load_after": load1}
        if network == "mlp":
            j.update({"epochs": epochs, "samples_per_s": sps, "test_accuracy": acc,
                      "test_accuracy_minus_fp32": acc - f32[1], "rank0_train_loss": tloss,
                      "rank0_train_accuracy": tacc, "rank0_train_accuracy_minus_fp32": tacc - f32[3]})
        else:
            j.update({"steps": steps, "tokens_per_s": sps, "val_bits_per_byte": acc,
                      "val_bits_per_byte_minus_fp32": acc - f32[1]})
        lines.append(j)
if "lo" in links and (("lo", "fp32") in r):
    costs = [f"{cfg} {1 - r[('lo', cfg)][0] / r[('lo', 'fp32')][0]:+.0%}"
             for cfg in cfgs if cfg != "fp32"]
    if costs:
        print(f"cost on the loopback (1 - {rate} over fp32 DDP's): " + ", ".join(costs))
for j in lines:
    print(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else
                          round(v, 4) if isinstance(v, float) else v) for k, v in j.items()}))
PY
