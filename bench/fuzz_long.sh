#!/usr/bin/env bash
# Runs each libFuzzer harness (tests/fuzz, built by the main build when clang is found:
# build/fuzz/*_fuzz, build/fuzz_reliability/*_fuzz) for SECONDS (default 300), one after the
# other (each is single-threaded), from its seed corpus, and prints a table: runs, executions
# per second, coverage, corpus growth, peak memory, findings. A finding's input lands in
# $OUT/<harness>/crash-* (add it to tests/fuzz/corpus/<harness>/ with a regression test).
# secs: the fuzzing time libFuzzer reports (a run that stops on a finding stops early); wall_s:
# the script's clock. Usage: bench/fuzz_long.sh [build-dir] [seconds] [harness...]
#   e.g. bench/fuzz_long.sh build 300 ; bench/fuzz_long.sh build 300 npy shard
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
SECS=${2:-300}
TIMEOUT=${LOOM_FUZZ_TIMEOUT:-10}  # seconds one input may take
shift $(($# > 2 ? 2 : $#))
HARNESSES=("$@")
[ ${#HARNESSES[@]} -gt 0 ] || HARNESSES=(config checkpoint idx csv npy shard safetensors codec_fp32 codec_fp16
  codec_bf16 codec_int8 codec_onebit codec_topk codec_powersgd)
OUT=${LOOM_FUZZ_OUT:-$B/fuzz_long}
mkdir -p "$OUT"
rows=()
failed=0
for h in "${HARNESSES[@]}"; do
  bin=$B/fuzz/${h}_fuzz
  [ -x "$bin" ] || bin=$B/fuzz_reliability/${h}_fuzz
  [ -x "$bin" ] || { echo "$h: no harness in $B/fuzz or $B/fuzz_reliability (build loom_fuzz)"; failed=1; continue; }
  dir=$OUT/$h
  rm -rf "$dir" && mkdir -p "$dir/corpus"
  seeds=$(ls tests/fuzz/corpus/"$h" | wc -l)
  echo "== $h: ${SECS} s from $seeds seeds ($(date -u +%H:%M:%S) UTC)"
  t0=$(date +%s)
  "$bin" -max_total_time="$SECS" -rss_limit_mb=2048 -timeout="$TIMEOUT" -print_final_stats=1 \
    -artifact_prefix="$dir/" "$dir/corpus" "tests/fuzz/corpus/$h" >"$dir/log" 2>&1
  rc=$?
  wall=$(($(date +%s) - t0))
  # libFuzzer's -timeout is wall-clock: a process paused with SIGSTOP (here `quiet` pauses
  # `long` jobs) reports a "timeout" for whatever input it was running. Replay it in a fresh
  # process: only a timeout that reproduces is a finding.
  for t in "$dir"/timeout-*; do
    [ -e "$t" ] || continue
    if timeout $((2 * TIMEOUT)) "$bin" -timeout="$TIMEOUT" "$t" >/dev/null 2>&1; then
      echo "$h: ${t##*/} runs in time when replayed (the process was paused): not a finding"
      mv "$t" "$dir/paused-${t##*/}"
      rc=0
    fi
  done
  secs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$dir/log" | grep -o '[0-9]* second' | grep -o '[0-9]*')
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir/log" | grep -o '[0-9]*$')
  eps=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$dir/log" | grep -o '[0-9]*$')
  rss=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$dir/log" | grep -o '[0-9]*$')
  cov=$(grep -Eo 'cov: [0-9]+' "$dir/log" | tail -1 | grep -o '[0-9]*')
  units=$(ls "$dir/corpus" | wc -l)
  # slow-unit-* files are information only (and wall time: a `quiet` measurement pauses this
  # job with SIGSTOP); replay one with "$bin FILE" to time it.
  findings=$(ls "$dir" | grep -Ec '^(crash|leak|timeout|oom)-')
  [ "$rc" -eq 0 ] && [ "$findings" -eq 0 ] || { failed=1; grep -m5 -E "ERROR|SUMMARY|runtime error" "$dir/log"; }
  rows+=("$(printf '%-11s %6s %6s %12s %10s %8s %9s %8s %8s %4s' "$h" "${secs:-?}" "$wall" "${runs:-?}" "${eps:-?}" \
    "${cov:-?}" "+$units" "${rss:-?}" "$findings" "$rc")")
done
echo
printf '%-11s %6s %6s %12s %10s %8s %9s %8s %8s %4s\n' harness secs wall_s runs "exec/s" cov "corpus" \
  "rss_mb" findings rc
printf '%s\n' "${rows[@]}"
exit $failed
