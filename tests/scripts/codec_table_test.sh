#!/usr/bin/env bash
# bench/codec_table.py on stores written here (no training): `table` pairs each configuration
# with fp32 by seed under the newest recipe and judges it only once every seed is in, with the
# metric's own direction (points lost, bits/byte gained); `run --dry-run` plans only what the
# store lacks; a store of another format version or a line that is not JSON is refused naming
# the file and line. ($1: the built loom, which the dry runs name but do not start.)
set -euo pipefail
. "$(dirname "$(realpath "$0")")/expect.sh"  # fail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TABLE=("$(command -v python3)" "$ROOT/bench/codec_table.py")
"${TABLE[0]}" -c "import tomllib" 2>/dev/null || { echo "SKIP: python3 without tomllib (3.11)"; exit 77; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT

"${TABLE[0]}" - "$T/store.jsonl" <<'PY'
import json, sys
rows = []
def add(network, recipe, config, seed, value, date="2026-12-06 10:00 UTC"):
    rows.append({"format_version": 1, "network": network, "recipe": recipe, "config": config,
                 "seed": seed, "metric": "test_acc" if network != "gpt-char" else
                 "val_bits_per_byte", "value": value, "bytes_per_step": 100.0 * (seed + 1),
                 "steps": 1, "samples_per_s": 1.0, "wall_s": 1.0, "loom": "t", "cpu": "c",
                 "date": date, "command": "x"})
fp32 = [0.8700, 0.8600, 0.8650, 0.8800, 0.8750]
onebit = [0.8680, 0.8590, 0.8620, 0.8790, 0.8720]  # -0.2 -0.1 -0.3 -0.1 -0.3: mean -0.2
for s, (a, b) in enumerate(zip(fp32, onebit)):
    add("mlp", "new", "fp32", s, a)
    add("mlp", "new", "onebit", s, b)
    add("mlp", "new", "powersgd", s, a - 0.005)    # -0.5 points a seed: not met
    add("mlp", "old", "bf16", s, 0.1, date="2026-12-05 10:00 UTC")  # an older recipe: unread
for s in (0, 1):
    add("mlp", "new", "topk", s, fp32[s])          # 2 of 5 seeds: not judged
for s, (a, b) in enumerate(zip([2.80, 2.78, 2.82], [2.84, 2.83, 2.88])):  # +0.04 +0.05 +0.06
    add("gpt-char", "g", "fp32", s, a)
    add("gpt-char", "g", "onebit_adam", s, b)
with open(sys.argv[1], "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
PY
"${TABLE[@]}" table --store "$T/store.jsonl" --json > "$T/rows.jsonl" || fail "table exited non-zero"
"${TABLE[0]}" - "$T/rows.jsonl" <<'PY' || fail "table rows"
import json, math, sys
rows = {(r["network"], r["config"]): r for r in map(json.loads, open(sys.argv[1]))}
def check(what, ok):
    if not ok:
        sys.exit(f"codec_table_test: {what}")
o = rows[("mlp", "onebit")]
check("onebit's seeds", o["seeds"] == [0, 1, 2, 3, 4])
check("onebit's mean difference", abs(o["diff_mean"] + 0.2) < 1e-9)
se = math.sqrt(sum((d + 0.2) ** 2 for d in (-0.2, -0.1, -0.3, -0.1, -0.3)) / 4 / 5)
check("onebit's standard error", abs(o["diff_se"] - se) < 1e-9)
check("onebit's verdict", o["verdict"] == "met")
check("onebit's bytes", abs(o["bytes_per_step"] - 300.0) < 1e-9)
check("powersgd's verdict", rows[("mlp", "powersgd")]["verdict"] == "not met")
check("topk judged on 2 seeds", rows[("mlp", "topk")]["verdict"] == "2 of 5 seeds")
check("an older recipe read", not rows[("mlp", "bf16")]["seeds"])
g = rows[("gpt-char", "onebit_adam")]
check("bits/byte difference", abs(g["diff_mean"] - 0.05) < 1e-9)
check("bits/byte verdict (higher is worse)", g["verdict"] == "not met")
check("gpt-char has no onebit row", ("gpt-char", "onebit") not in rows)
check("resnet20 without runs is left out", not any(n == "resnet20" for n, _ in rows))
PY
out=$("${TABLE[@]}" table --store "$T/store.jsonl")
grep -qF "| onebit | 0,1,2,3,4 | 0.8680 | -0.20 +- 0.04 |" <<< "$out" || fail "the printed MLP row"

# Planning: what the store holds under the recipe's fingerprint is skipped.
fp=$(cd "$ROOT/bench" && "${TABLE[0]}" -c "import codec_table; print(codec_table.NETWORKS['mlp'].fingerprint())")
printf '{"format_version": 1, "network": "mlp", "recipe": "%s", "config": "fp32", "seed": 0, "value": 0.87, "date": "d"}\n' \
  "$fp" > "$T/done.jsonl"
out=$("${TABLE[@]}" run --dry-run --networks mlp --store "$T/done.jsonl" --loom "$1")
grep -q "^39 runs to do" <<< "$out" || fail "dry run: $out"
grep -q "mlp fp32 seed 0" <<< "$out" && fail "dry run plans a run the store holds"
grep -q "mlp fp32 seed 1" <<< "$out" || fail "dry run leaves out a missing run"
out=$("${TABLE[@]}" run --dry-run --networks mlp,gpt-char --seeds 0 --configs onebit_adam \
        --store "$T/done.jsonl" --loom "$1" 2>&1) && fail "onebit_adam on the MLP taken"
grep -q "unknown configuration for mlp 'onebit_adam'" <<< "$out" || fail "the refusal: $out"

# Bad stores name the file and line.
sed 's/"format_version": 1/"format_version": 2/' "$T/done.jsonl" > "$T/v2.jsonl"
out=$("${TABLE[@]}" table --store "$T/v2.jsonl" 2>&1) && fail "format version 2 read"
grep -q "v2.jsonl:1: format_version 2" <<< "$out" || fail "version error: $out"
printf '{"format_version": 1}\nnot json\n' > "$T/bad.jsonl"
out=$("${TABLE[@]}" table --store "$T/bad.jsonl" 2>&1) && fail "a bad line read"
grep -q "bad.jsonl:2: not a JSON line" <<< "$out" || fail "bad line error: $out"
echo "codec_table_test: ok"
