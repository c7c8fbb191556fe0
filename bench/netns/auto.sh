#!/bin/bash
# bench/netns/auto.sh - does codec/sync = "auto" choose well? 2-rank data-parallel training
# on a bandwidth-limited link: every fixed configuration and `auto`, in one run:
#
#   bench/netns/auto.sh [--loom PATH] [--steps N] [--rates "1gbit 10gbit off"]
#                       [--configs "..."] [--repeats R] [--budget POINTS]
#                       [--sets "KEY=VALUE ..."] [--network NAME] [--within "CONFIGS"]
#                       [--config FILE]
#   bench/netns/auto.sh --accuracy [--seeds "0 1 2"] [--epochs 3] [--configs "fp32 auto"] ...
#
# The test bed of compare.sh (lib.sh: two network namespaces joined by a veth shaped with
# tbf, `mpirun -np 2` with one `loom train` rank in each, Open MPI over TCP). For each rate,
# R rounds; in each round every config runs once, the configs taking turns (interleaved), so
# that load changes touch them alike. Each run trains the Fashion-MNIST MLP (784-1024-1024-10,
# batch 128 per rank, 1 thread) for N steps, or what --config (a recipe's config file, such as
# configs/resnet20.toml) and --sets make of it (another model, data, optimizer or batch: keys for
# every run, over the file's; --network names it in the output). A network that no accuracy row
# describes starts auto on a lossless option and decides by each codec's fidelity at the check
# (step 30 by default): N well above that shows its steady choice. `auto` is codec = "auto",
# sync = "auto", sync.bucket_kib = "auto" with auto.max_accuracy_delta = POINTS (default 0.5):
# it measures at start and chooses (perf/auto_choice.h). Prints per rate and config the median
# samples/s of the training loop; for auto its choice in each repeat, its median against the
# best fixed configuration within the accuracy budget (and the median of the per-round ratios,
# each round's auto against that config's run of the same round) and against fp32, and what its
# start-up measurement cost as a share of a 1,000-step run. --within names the fixed configs
# whose accuracy cost on this network is known to be within the budget (the codec table,
# docs/compress.md; default: every fixed config, as for the reference MLP, whose rows are all
# within 0.5 points); auto is held against the fastest of them. Each choice carries the check
# after the warm-up window ("(ok,step+5%)": within the model's error, "(kept,step+40%)", or
# "->NEW": switched to NEW).
# One JSON object per line follows ({"bench":"netns_auto",...}).
# --accuracy: instead of N steps, each run trains the whole recipe (--epochs, evaluation on)
# once per seed of --seeds, every config from the same seed (the same initial weights, data
# order and dropout), and the table gives each config's mean test accuracy (bits/byte for a
# token run) and its difference from fp32 paired by seed, with its standard error: is auto's
# choice on this link within its budget of fp32? ({"bench":"netns_auto_accuracy",...}). A fixed
# configuration trains the same bits on every link (a seeded run is deterministic; the link
# changes only its speed), so it runs at the first rate only and its accuracy stands for every
# rate; auto, whose choice depends on the link, runs at each.
# Needs root, iproute2, Open MPI and loom built with MPI; the namespaces go on exit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
LOOM=${LOOM:-$root/build/loom}
STEPS=${STEPS:-150}
REPEATS=${REPEATS:-3}
RATES=${RATES:-"1gbit 10gbit off"}
CONFIGS=${CONFIGS:-"fp32 fp16 int8 onebit bmuf8 bmuf8-onebit auto"}
BUDGET=${BUDGET:-0.5}
TIMEOUT=${TIMEOUT:-}  # seconds a run may take; default below (300, or 7200 with --accuracy)
SETS=${SETS:-}
NETWORK=${NETWORK:-"MLP 784-1024-1024-10, batch 128/rank"}
ACCURACY=false SEEDS="0 1 2" EPOCHS=3 WITHIN="" CONFIG_FILE=""
while [ $# -gt 0 ]; do
  case $1 in
    --loom) LOOM=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --rates) RATES=$2; shift 2 ;;
    --configs) CONFIGS=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --sets) SETS=$2; shift 2 ;;
    --network) NETWORK=$2; shift 2 ;;
    --within) WITHIN=$2; shift 2 ;;
    --config) CONFIG_FILE=$2; shift 2 ;;
    --accuracy) ACCURACY=true; shift ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
    *) echo "auto.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
# A whole recipe (gpt-char's 1,700 steps) takes 8-10 minutes a run on two cores.
if [ -z "$TIMEOUT" ]; then if $ACCURACY; then TIMEOUT=7200; else TIMEOUT=300; fi; fi
# shellcheck source=bench/netns/lib.sh
. "$here/lib.sh"
netns_preflight auto.sh "$LOOM"
recipe=()
if [ -n "$CONFIG_FILE" ]; then
  [ -f "$CONFIG_FILE" ] || { echo "auto.sh: --config '$CONFIG_FILE': no such file" >&2; exit 2; }
  recipe=("$(cd "$(dirname "$CONFIG_FILE")" && pwd)/$(basename "$CONFIG_FILE")")
fi

config_args() {
  case $1 in
    fp32) echo "codec=fp32" ;;
    fp16) echo "codec=fp16" ;;
    int8) echo "codec=int8" ;;
    onebit) echo "codec=onebit" ;;
    bmuf8) echo "sync=bmuf bmuf.tau=8" ;;
    bmuf8-onebit) echo "sync=bmuf bmuf.tau=8 codec=onebit" ;;
    auto) echo "codec=auto sync=auto sync.bucket_kib=auto auto.max_accuracy_delta=$BUDGET" ;;
    *) echo "auto.sh: unknown config '$1'" >&2; return 1 ;;
  esac
}
for c in $CONFIGS; do config_args "$c" >/dev/null; done
for c in $WITHIN; do
  case " $CONFIGS " in
    *" $c "*) [ "$c" != auto ] || { echo "auto.sh: --within names fixed configs, not auto" >&2; exit 2; } ;;
    *) echo "auto.sh: --within names '$c', which is not in --configs ($CONFIGS)" >&2; exit 2 ;;
  esac
done

netns_begin loom_netns_auto
work=$NB_WORK
netns_up
read -ra MPIRUN <<<"$(netns_mpirun_cmd "$work/hosts")"

run_one() {  # rate config repeat -> "samples_per_s choice cost_share accuracy"
  local rate=$1 cfg=$2 out="$work/$1-$2-$3" sets=() a length
  for a in $SETS $(config_args "$cfg"); do sets+=(--set "$a"); done
  if $ACCURACY; then  # the whole recipe from seed $3, evaluated
    length=(--set epochs="$EPOCHS" --set seed="$3")
  else
    # epochs = N lets max_steps, not the data set, end the run (an epoch is at least one
    # step; the MLP's is 234, ResNet-20's 468), and the schedule still spans the N steps.
    length=(--set max_steps="$STEPS" --set epochs="$STEPS" --set eval=false)
  fi
  mkdir -p "$out"
  if ! timeout "$TIMEOUT" "${MPIRUN[@]}" -np 2 "$LOOM" train "${recipe[@]}" "${length[@]}" \
      --set progress=none --set threads=1 \
      --set output.dir="$out" "${sets[@]}" >"$out/log" 2>&1; then
    echo "auto.sh: $cfg at $rate failed; last lines of its log:" >&2
    tail -5 "$out/log" >&2
    echo "nan - nan nan"
    return
  fi
  /usr/bin/python3 - "$out" "$($ACCURACY && echo 0 || echo "$STEPS")" <<'PY'
import json, sys
s = json.load(open(f"{sys.argv[1]}/summary.json"))
if s["steps"] < int(sys.argv[2]):  # a speed run that ended before its --steps
    print(f"auto.sh: {sys.argv[1]} ran {s['steps']} steps, not {sys.argv[2]}", file=sys.stderr)
a = s.get("auto")
def label(c):
    return c["codec"] + "/" + c["sync"] + (f"{c['tau']}" if c["sync"] == "bmuf" else "") + f"/{c['bucket_kib']}K"
if a:
    name = label(a["chosen"])
    # The check after the warm-up window: ok (within the model's error), kept, or the switch.
    v = a.get("revision", {})
    o = v.get("outcome", "")
    if o == "switched":
        name += "->" + label(v["after"])
    elif o in ("agrees", "kept"):
        name += "(" + ("ok" if o == "agrees" else "kept") + f",step{100 * (v['measured']['step_s'] / v['predicted']['step_s'] - 1):+.0f}%)"
    rest = (name, a["measured"].get("cost_share_of_1000_steps", float("nan")))
else:
    rest = ("-", "nan")
# The run's accuracy: test accuracy, or validation bits/byte for a token run.
acc = s.get("test_acc")
if acc is None:
    acc = s.get("val_bits_per_byte")
print(s["samples_per_s"], *rest, "nan" if acc is None else acc)
PY
}

results="$work/results"
: >"$results"
rounds=$(seq "$REPEATS")
$ACCURACY && rounds=$SEEDS
first_rate=${RATES%% *}
for rate in $RATES; do
  netns_shape "$rate"
  for rep in $rounds; do
    for cfg in $CONFIGS; do
      if $ACCURACY && [ "$cfg" != auto ] && [ "$rate" != "$first_rate" ]; then
        # The fixed config's run at the first rate: the same bits on every link.
        read -r _ _ sps choice share acc _ < <(grep "^$first_rate $cfg .* $rep\$" "$results")
        echo "$rate $cfg $sps $choice $share $acc $rep" >>"$results"
        continue
      fi
      read -r sps choice share acc < <(run_one "$rate" "$cfg" "$rep")
      echo "$rate $cfg $sps $choice $share $acc $rep" >>"$results"
      printf '  %-6s %-13s %8s samples/s %s %s\n' "$rate" "$cfg" "$sps" "$choice" \
        "$($ACCURACY && echo "accuracy $acc (seed $rep)")" >&2
    done
  done
done

if $ACCURACY; then
  /usr/bin/python3 - "$results" "$EPOCHS" "$NETWORK" <<'PY'
import json, math, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
epochs, network = sys.argv[2], sys.argv[3]
acc = {}
for rate, cfg, _, choice, _, a, seed in rows:
    acc.setdefault((rate, cfg), {})[seed] = (float(a), choice)
print(f"2 ranks (one per network namespace), {network}, {epochs} epochs, paired by seed")
print(f"{'link':<7} {'config':<13} {'accuracy':>9} {'- fp32':>8} {'s.e.':>7}  seeds / auto's choices")
for rate in dict.fromkeys(r[0] for r in rows):
    base = acc.get((rate, "fp32"), {})
    for cfg in dict.fromkeys(r[1] for r in rows):
        runs = acc[(rate, cfg)]
        vals = [a for a, _ in runs.values() if not math.isnan(a)]
        diffs = [runs[s][0] - base[s][0] for s in runs if s in base
                 and not math.isnan(runs[s][0]) and not math.isnan(base[s][0])]
        mean = statistics.mean(vals) if vals else float("nan")
        d = statistics.mean(diffs) if diffs else float("nan")
        se = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else float("nan")
        choices = [c for _, c in runs.values() if c != "-"]
        print(f"{rate:<7} {cfg:<13} {mean:>9.4f} {d:>+8.4f} {se:>7.4f}  {' '.join(runs)}"
              + (f" / {', '.join(choices)}" if choices else ""))
        print(json.dumps({"bench": "netns_auto_accuracy", "network": network, "link": rate,
                          "config": cfg, "epochs": epochs, "seeds": list(runs),
                          "accuracy_mean": None if math.isnan(mean) else mean,
                          "minus_fp32_mean": None if math.isnan(d) else d,
                          "minus_fp32_se": None if math.isnan(se) else se,
                          "choices": choices}))
PY
  exit 0
fi

/usr/bin/python3 - "$results" "$STEPS" "$REPEATS" "$NETWORK" "$WITHIN" <<'PY'
import json, math, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
steps, repeats, network = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
within = sys.argv[5].split()
by = {}
run = {}  # (rate, config, round) -> samples/s
for rate, cfg, s, choice, share, _, rep in rows:
    by.setdefault((rate, cfg), []).append((float(s), choice, float(share)))
    run[(rate, cfg, rep)] = float(s)
reps = list(dict.fromkeys(x[6] for x in rows))
rates = list(dict.fromkeys(x[0] for x in rows))
cfgs = list(dict.fromkeys(x[1] for x in rows))
def med(v):
    v = [x for x in v if not math.isnan(x)]
    return statistics.median(v) if v else float("nan")
print(f"2 ranks (one per network namespace), {network}, {steps} steps, "
      f"median of {repeats} interleaved repeats")
print(f"{'link':<7} {'config':<13} {'samples/s':>10} {'x fp32':>7}  auto's choices / vs best fixed / start-up cost")
out = []
for rate in rates:
    meds = {c: med([x[0] for x in by[(rate, c)]]) for c in cfgs}
    fixed = {c: v for c, v in meds.items() if c != "auto" and not math.isnan(v)
             and (not within or c in within)}
    best = max(fixed, key=fixed.get) if fixed else None
    for c in cfgs:
        f32 = meds[c] / meds["fp32"] if "fp32" in meds else float("nan")
        extra = ""
        j = {"bench": "netns_auto", "network": network, "link": rate, "config": c, "steps": steps,
             "repeats": repeats, "samples_per_s_median": meds[c], "x_fp32": f32}
        if c == "auto" and best:
            choices = [x[1] for x in by[(rate, c)]]
            share = med([x[2] for x in by[(rate, c)]])
            vs = meds[c] / fixed[best]
            # Paired by round: auto against the best fixed config's run of the same round, the
            # two taking turns, so that a slow round slows both. The ratio of the medians can
            # set one round's auto against another's config.
            paired = [run[(rate, c, r)] / run[(rate, best, r)] for r in reps
                      if (rate, c, r) in run and (rate, best, r) in run]
            paired = [x for x in paired if not math.isnan(x)]
            pmed = statistics.median(paired) if paired else float("nan")
            spread = f" ({min(paired):.2f}-{max(paired):.2f})" if len(paired) > 1 else ""
            extra = (f"  {', '.join(choices)} / {vs:.2f} of {best}, paired by round {pmed:.2f}"
                     f"{spread} / {100 * share:.1f}% of 1,000 steps")
            j.update({"choices": choices, "best_fixed": best, "vs_best_fixed": vs,
                      "vs_best_fixed_paired_median": pmed, "vs_best_fixed_paired": paired,
                      "startup_share_of_1000_steps": share})
        print(f"{rate:<7} {c:<13} {meds[c]:>10.0f} {f32:>7.2f}{extra}")
        out.append(j)
for j in out:
    print(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in j.items()}))
PY
