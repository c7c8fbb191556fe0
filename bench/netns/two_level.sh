#!/bin/bash
# bench/netns/two_level.sh - the two-level allreduce against the flat ring on 2 emulated
# machines x 2 ranks joined by a shaped link, with the performance model's predictions:
#
#   sudo bench/netns/two_level.sh [--loom PATH] [--steps N] [--rate 1gbit] [--repeats R]
#                                 [--codec NAME] [--configs "LIST"] [--phases]
#
# Two network namespaces joined by a veth (lib.sh) shaped with tbf to RATE; `mpirun -np 4`
# puts ranks 0, 1 in the first namespace and 2, 3 in the second (each namespace is its own
# node to Open MPI, so loom finds 2 machines x 2 ranks through MPI_Comm_split_type; TCP
# between all ranks). It trains the Fashion-MNIST MLP (configs/mlp.toml: 784-1024-1024-10,
# batch 128 per rank, 1 thread per rank, no evaluation) for N steps in three configs:
#   ring          comm.algorithm = "ring", sync.shard_optimizer = false: the flat ring
#                 allreduce in its best rank order (the ring crosses the link once each way)
#   ring-sharded  comm.algorithm = "ring": the sharded update's flat reduce-scatter and
#                 allgather (the default before two-level; the same bytes as the ring)
#   two-level     comm.algorithm = "two-level" (what "auto" picks on this layout)
#   codec-flat    codec = NAME (--codec, default onebit), comm.algorithm = "ring": the codec's
#                 own exchange over all 4 ranks (every rank sends each owner its stripe)
#   codec-two-level  codec = NAME, comm.algorithm = "two-level": fp32 inside each namespace, the
#                 codec only across the link (sync/allreduce/two_level_compressed_allreduce.h)
# (--configs picks some of them, e.g. --configs "codec-flat codec-two-level"), and reads
# samples/s (training loop only) from summary.json; with --repeats R the configs take turns R
# times and the best is kept. Then `loom bench calibrate` measures this machine, `loom bench
# allreduce` the links inside a namespace and across (below), and `loom scale` predicts 2 x 2
# this-machine ranks, --sync ring and --sync two-level, without and with the codec, printing
# the model's terms per step. With --phases each config runs once more with a timeline
# (`trace.steps` 20 of every 3rd step, not counted in samples/s) and prints its mean per-step
# phases over all ranks (forward, backward, the exchange's spans, the optimizer) beside the
# model's terms. Prints a table, the ratios
# two-level / ring and codec two-level / codec flat (measured and predicted), and one JSON
# object per line ({"bench":"netns_two_level"}).
# The namespaces are deleted on exit. Needs root, iproute2, Open MPI, loom built with MPI.
# Figures are speeds: on a shared machine they move with the load (they are a benchmark, not
# a test).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
LOOM=${LOOM:-$root/build/loom}
STEPS=${STEPS:-60}
RATE=${RATE:-1gbit}
REPEATS=${REPEATS:-1}
TIMEOUT=${TIMEOUT:-600}
CODEC=${CODEC:-onebit}
CONFIGS=${CONFIGS:-"ring ring-sharded two-level codec-flat codec-two-level"}
PHASES=0
while [ $# -gt 0 ]; do
  case $1 in
    --loom) LOOM=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --codec) CODEC=$2; shift 2 ;;
    --configs) CONFIGS=$2; shift 2 ;;
    --phases) PHASES=1; shift ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "two_level.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
# shellcheck source=bench/netns/lib.sh
. "$here/lib.sh"
netns_preflight two_level.sh "$LOOM"
case $RATE in
  *gbit) gbps=${RATE%gbit} ;;
  *mbit) gbps=$(awk "BEGIN{print ${RATE%mbit} / 1000}") ;;
  *) echo "two_level.sh: --rate '$RATE' is not NNgbit / NNmbit" >&2; exit 2 ;;
esac

config_args() {
  case $1 in
    ring) echo "comm.algorithm=ring sync.shard_optimizer=false" ;;
    ring-sharded) echo "comm.algorithm=ring" ;;
    two-level) echo "comm.algorithm=two-level" ;;
    codec-flat) echo "comm.algorithm=ring codec=$CODEC" ;;
    codec-two-level) echo "comm.algorithm=two-level codec=$CODEC" ;;
    *) echo "two_level.sh: unknown config '$1' (ring, ring-sharded, two-level, codec-flat," \
         "codec-two-level)" >&2; exit 2 ;;
  esac
}
for cfg in $CONFIGS; do config_args "$cfg" >/dev/null; done

netns_begin loom_two_level
work=$NB_WORK
netns_up
netns_shape "$RATE"
read -ra MPIRUN <<<"$(netns_mpirun_cmd "$work/hosts" 2)"

run_one() {  # config repeat [extra --set ...] -> prints samples/s (nan on failure)
  local cfg=$1 out="$work/$1-$2" sets=() a
  for a in $(config_args "$cfg"); do sets+=(--set "$a"); done
  shift 2
  sets+=("$@")
  mkdir -p "$out"
  if ! timeout "$TIMEOUT" "${MPIRUN[@]}" -np 4 "$LOOM" train "$root/configs/mlp.toml" \
      --set max_steps="$STEPS" --set epochs=1 --set eval=false --set progress=none \
      --set threads=1 --set output.dir="$out" "${sets[@]}" >"$out/log" 2>&1; then
    echo "two_level.sh: $cfg failed; last lines of its log:" >&2
    tail -5 "$out/log" >&2
    echo nan
    return
  fi
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples_per_s"])' \
    "$out/summary.json"
}

results="$work/results"
: >"$results"
echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg): 2 x 2 ranks, link $RATE," \
  "codec $CODEC" >&2
for rep in $(seq "$REPEATS"); do
  for cfg in $CONFIGS; do
    sps=$(run_one "$cfg" "$rep")
    echo "$cfg $sps" >>"$results"
    printf '  %-16s %8s samples/s\n' "$cfg" "$sps" >&2
  done
done
if [ "$PHASES" = 1 ]; then
  echo "# phases (a timeline of 20 steps, every 3rd, all ranks; ms per step):" >&2
  for cfg in $CONFIGS; do
    run_one "$cfg" trace --set "trace.file=$work/$cfg-trace/trace.json" --set trace.steps=20 \
      --set trace.every=3 >/dev/null
    /usr/bin/python3 - "$work/$cfg-trace" "$cfg" <<'PY' >&2 || true
import collections, glob, json, sys
tot, steps = collections.defaultdict(float), 0
for f in glob.glob(sys.argv[1] + "/trace.json*"):
    ev = json.load(open(f))
    ev = ev.get("traceEvents", []) if isinstance(ev, dict) else ev
    for e in ev:
        if e.get("ph") != "X":
            continue
        cat, name = e.get("cat", ""), e["name"]
        key = cat if cat in ("forward", "backward", "step") else name.split(" bucket")[0]
        tot[key] += e["dur"] / 1e3
        steps += key == "step"
if steps:
    print(f"#   {sys.argv[2]}: " + ", ".join(f"{k} {v / steps:.2f}" for k, v in sorted(tot.items())))
PY
  done
fi
# What the strategy said it ran (the first rank's log line), for the record.
for cfg in two-level codec-two-level; do
  [ -f "$work/$cfg-1/log" ] && grep -h -m1 -o "allreduce over mpi (.*" "$work/$cfg-1/log" >&2
done || true

# The model: this machine's measured rates, 2 machines x 2 ranks, and both links measured as
# the run meets them (loom's ring allreduce over MPI point-to-point, `loom bench allreduce`):
#   inside a namespace: 2 ranks in the first namespace through the bed's Open MPI transport
#     (TCP over loopback: the two-level stages inside a machine are point-to-point rings,
#     not the shared-memory collective), the "ring" rows as link this-machine-mpi-p2p;
#   across: 1 rank in each namespace through the shaped veth, its ring rows of 1-4 MiB fitted
#     to t = 2 alpha + bytes / rate (2 ranks) as link netns-shaped (the tbf rate at TCP's 1448
#     payload bytes of 1514 is printed beside it: the ceiling);
#   messages between ranks that share cores: the run's 4 ranks, a ring of 32 bytes, as a
#     shared_core_messages calibration line (docs/perf.md): each of its 6 messages waits for
#     its receiver to get a core, which the model takes as both links' alpha.
# The model shares the intra link's measured rate among the ranks on the cores (4 ranks on
# 2 cores: each copies at half a core), as it does the GEMM rate.
echo "# calibrating (loom bench calibrate; loom bench allreduce inside a namespace and across)" >&2
"$LOOM" bench calibrate -o "$work/cal.jsonl" >/dev/null 2>&1
read -ra MPIRUN1 <<<"$(netns_mpirun_cmd "$work/hosts1" 1)"
# Each 3 times, the fastest time of each size kept: the model takes a link as its ranks move
# it with a core each, which the least disturbed of the runs is closest to (as the configs'
# best of R).
: >"$work/intra.jsonl"
: >"$work/inter.jsonl"
: >"$work/shared.jsonl"
for _ in 1 2 3; do
  # The run's own layout, 4 ranks on this machine's cores: a small ring's 6 messages in
  # sequence, each waiting for its receiver to get a core (shared_core_messages).
  "${MPIRUN[@]}" -np 4 "$LOOM" bench allreduce --transport mpi --json --min-bytes 32 \
    --max-bytes 32 --budget 0.5 >>"$work/shared.jsonl" 2>>"$work/shared.log" || true
  "${MPIRUN[@]}" -np 2 "$LOOM" bench allreduce --transport mpi --json --min-bytes 1048576 \
    --max-bytes 16777216 --budget 0.5 >>"$work/intra.jsonl" 2>>"$work/intra.log" || true
  # Across: the sizes of the run's collectives (up to its 4 MiB buckets). TCP through tbf
  # moves a longer transfer slower (16 MiB at 0.093 GB/s against 4 MiB at 0.104 here), which
  # t = 2 alpha + bytes / rate cannot follow; the sizes the run moves set the rate.
  "${MPIRUN1[@]}" -np 2 "$LOOM" bench allreduce --transport mpi --json --min-bytes 1048576 \
    --max-bytes 4194304 --factor 2 --budget 0.5 >>"$work/inter.jsonl" 2>>"$work/inter.log" || true
done
for f in intra inter; do
  /usr/bin/python3 - "$work/$f.jsonl" <<'PY'
import json, sys
best = {}
for line in open(sys.argv[1]):
    if not line.startswith("{"):
        continue
    j = json.loads(line)
    if j.get("bench") != "allreduce":
        continue
    key = (j.get("algo"), j.get("ranks"), j.get("bytes"))
    if key not in best or j["lat_us"] < best[key]["lat_us"]:
        best[key] = j
with open(sys.argv[1], "w") as out:
    for j in best.values():
        out.write(json.dumps(j) + "\n")
PY
done
/usr/bin/python3 - "$work/intra.jsonl" "$work/cal.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
with open(sys.argv[2], "a") as out:
    for j in rows:
        if j.get("bench") == "allreduce" and j.get("algo") == "ring":
            j["transport"] = "mpi-p2p"
            out.write(json.dumps(j) + "\n")
            print(f"#   inside a namespace, 2 ranks, loom's ring: {j['bytes']} B in "
                  f"{j['lat_us'] / 1e3:.2f} ms", file=sys.stderr)
PY
/usr/bin/python3 - "$work/shared.jsonl" "$work/cal.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
rows = [j for j in rows if j.get("bench") == "allreduce" and j.get("algo") == "ring"]
if rows:
    j = min(rows, key=lambda j: j["lat_us"])
    n = j["ranks"]
    with open(sys.argv[2], "a") as out:
        out.write(json.dumps({"bench": "shared_core_messages", "ranks": n,
                              "messages": 2 * (n - 1), "time_us": j["lat_us"],
                              "format_version": j["format_version"]}) + "\n")
    print(f"#   {n} ranks on this machine's cores, loom's ring of {j['bytes']} B: "
          f"{j['lat_us'] / 1e3:.2f} ms, {j['lat_us'] / 2 / (n - 1) / 1e3:.2f} ms a message",
          file=sys.stderr)
PY
intra=this-machine-thread
grep -q '"transport": *"mpi-p2p"' "$work/cal.jsonl" && intra=this-machine-mpi-p2p
nominal_gbs=$(awk "BEGIN{print $gbps / 8 * 1448 / 1514}")
read -r inter_gbs inter_us <<<"$(/usr/bin/python3 - "$work/inter.jsonl" "$nominal_gbs" <<'PY'
import json, sys
pts = [(j["bytes"], j["lat_us"] * 1e-6) for j in map(json.loads,
       (l for l in open(sys.argv[1]) if l.startswith("{")))
       if j.get("bench") == "allreduce" and j.get("algo") == "ring" and j.get("ranks") == 2]
# least squares of t = 2 a + b / r over the sizes (a, 1/r >= 0)
n = len(pts)
if n >= 2:
    sx = sum(b for b, _ in pts); sy = sum(t for _, t in pts)
    sxx = sum(b * b for b, _ in pts); sxy = sum(b * t for b, t in pts)
    inv = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    a = (sy - inv * sx) / n / 2
    if a < 0 or inv <= 0:
        a, inv = 0.0, sxy / sxx
    print(f"{1 / inv / 1e9:.6f} {a * 1e6:.1f}")
else:
    print(f"{sys.argv[2]} 50")  # not measured: the tbf ceiling
PY
)"
echo "# links: inside a namespace $intra; across: measured $inter_gbs GB/s, alpha $inter_us us" \
  "(tbf ceiling $nominal_gbs GB/s)" >&2
cat >"$work/link.toml" <<TOML
[[link]]
name = "netns-shaped"
kind = "ethernet"
gbs = $inter_gbs
latency_us = $inter_us
efficiency = 1
source = "measured: loom's ring allreduce, 1 MPI rank per namespace through tbf at $RATE"
TOML
# the runs' buckets: sync.bucket_kib of configs/mlp.toml (loom's default 4096 KiB)
bucket_mb=$(/usr/bin/python3 -c 'import sys, tomllib
c = tomllib.load(open(sys.argv[1], "rb"))
print(c.get("sync", {}).get("bucket_kib", 4096) * 1024 / 1e6)' "$root/configs/mlp.toml" 2>/dev/null ||
  echo 4.194304)
predict() {  # sync codec [--shard-optimizer] -> samples/s at 4 ranks
  "$LOOM" scale --gpu this-machine --calibration "$work/cal.jsonl" --catalog "$work/link.toml" \
    --workload "$root/configs/mlp.toml" --nodes 2 --gpus-per-node 2 --one-host --inter netns-shaped \
    --intra "$intra" --sync "$1" --codec "$2" ${3:-} --bucket-mb "$bucket_mb" --svg "" \
    --json 2>/dev/null \
    >"$work/predict-$1-$2.json" || true
  /usr/bin/python3 - "$work/predict-$1-$2.json" <<'PY'
import json, sys
best = None
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("{"):
        continue
    j = json.loads(line)
    if j.get("gpus") == 4:
        best = j.get("samples_per_s")
        # the model's terms, per step, for comparison with a run's timeline
        print(f"#   {j['series']}: compute {j['compute_s']*1e3:.1f} ms, comm "
              f"{j['comm_s']*1e3:.1f} ms (exposed {j['exposed_s']*1e3:.1f}), update "
              f"{j['update_s']*1e3:.2f} ms, step {j['step_s']*1e3:.1f} ms", file=sys.stderr)
print(best if best is not None else "nan")
PY
}
pred_ring=$(predict ring fp32)
# the two-level run shards the update (sync.shard_optimizer's default); the ring run does not
pred_two=$(predict two-level fp32 --shard-optimizer)
pred_codec_flat=$(predict ring "$CODEC")
pred_codec_two=$(predict two-level "$CODEC")

/usr/bin/python3 - "$results" "$STEPS" "$RATE" "$pred_ring" "$pred_two" "$intra" \
  "$pred_codec_flat" "$pred_codec_two" "$CODEC" <<'PY'
import json, math, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
steps, rate, intra, codec = int(sys.argv[2]), sys.argv[3], sys.argv[6], sys.argv[9]
pred = {"ring": float(sys.argv[4]), "two-level": float(sys.argv[5]),
        "codec-flat": float(sys.argv[7]), "codec-two-level": float(sys.argv[8])}
best = {}
for cfg, s in rows:
    s = float(s)
    if cfg not in best or (not math.isnan(s) and (math.isnan(best[cfg]) or s > best[cfg])):
        best[cfg] = s
def ratio(a, b):
    return a / b if b and not math.isnan(a) and not math.isnan(b) else float("nan")
print(f"2 machines (network namespaces) x 2 ranks, link {rate}, MLP 784-1024-1024-10, "
      f"batch 128/rank, {steps} steps, codec {codec}; model: this machine's calibration, "
      f"intra {intra}")
print(f"{'config':<16} {'samples/s':>10} {'predicted':>10}")
for cfg in best:
    p = pred.get(cfg, float("nan"))
    print(f"{cfg:<16} {best[cfg]:>10.0f} {p:>10.0f}")
for a, b in (("two-level", "ring"), ("codec-two-level", "codec-flat")):
    if a in best and b in best:
        m, p = ratio(best[a], best[b]), ratio(pred[a], pred[b])
        print(f"{a} / {b}: measured {m:.2f}, predicted {p:.2f}")
for cfg in best:
    j = {"bench": "netns_two_level", "link": rate, "config": cfg, "ranks": 4, "machines": 2,
         "codec": codec if cfg.startswith("codec") else "fp32",
         "steps": steps, "samples_per_s": best[cfg], "predicted_samples_per_s": pred.get(cfg)}
    print(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v)
                      for k, v in j.items()}))
PY
