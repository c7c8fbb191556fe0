#!/usr/bin/env bash
# The device check: one run, under about 4 minutes, on a machine with a GPU. In order:
#   1. the GPU (nvidia-smi), and the binaries' libraries (ldd: nothing "not found", NCCL
#      included) before anything runs;
#   2. versions (driver, runtime), whether cuDNN runs here (the convolutions' engine), and the
#      NCCL transport's start-up time (loom_gpu_bench --parts info,nccl; NCCL gets 60 s);
#   3. the GPU tests in groups (every op and codec against the CPU reference, several ranks on
#      one GPU, the NCCL transport, training), with CUDA_LAUNCH_BLOCKING=1 so a bad launch is
#      reported at its own call, and NCCL_DEBUG=WARN;
#   4. a trimmed benchmark (MLP training, GEMM, convolutions on loom's kernels and on cuDNN,
#      copy bandwidth, the codec kernels);
#   5. optional: --torch (PyTorch eager on the same MLP), --train (`loom train` on nccl).
# Every step has its own `timeout -k`, and the whole run a budget (CHECK_BUDGET_S, default 230
# s): a step that no longer fits is not started and counts as failed.
#
# LOOM_GPU_REQUIRED=1 (the device machine should set it): no GPU is a failure, in this script,
# in every GPU test (which would otherwise skip) and in the benchmark. Without it, a machine
# with no GPU reports that plainly and exits 0 (a dry run). Skips are counted either way: with
# a GPU, any skipped test outside the expected list below fails the check.
#
# Results go to $OUT (default ./out) as they are made: check.log (everything printed),
# results.jsonl (one JSON object per test, per figure and per step, then a summary object),
# summary.txt.
#
# Binaries, the first found: --bin DIR (or LOOM_GPU_BIN), a directory holding
# loom_tensor_cuda_tests, loom_gpu_bench and optionally loom, or a CMake build tree that has
# built them; build-gpu-carry/loom-gpu.tar.xz (bench/gpu/pack.sh); --build (CMake Release
# here; minutes, outside the budget).
#   LOOM_GPU_REQUIRED=1 bash bench/gpu/check.sh [--bin DIR] [--torch] [--train] [--build]
# Exit status: 0 passed (or no GPU and not required); 1 a test, skip count or step failed;
# 2 no GPU under LOOM_GPU_REQUIRED=1; 3 no binaries; 4 a library not found.
set -uo pipefail
cd "$(dirname "$0")/../.."

BIN_DIR=${LOOM_GPU_BIN:-}
WANT_TORCH=0
WANT_TRAIN=0
WANT_BUILD=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN_DIR=$2; shift 2 ;;
    --torch) WANT_TORCH=1; shift ;;
    --train) WANT_TRAIN=1; shift ;;
    --build) WANT_BUILD=1; shift ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "check.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done

OUT=${OUT:-./out}
mkdir -p "$OUT"
LOG="$OUT/check.log"
RES="$OUT/results.jsonl"
SUMMARY="$OUT/summary.txt"
: >"$RES"
: >"$SUMMARY"
# Intermediate files stay out of $OUT (the device tool returns only a few files from it).
W=$(mktemp -d)
exec > >(tee "$LOG") 2>&1

REQUIRED=0
case "${LOOM_GPU_REQUIRED:-0}" in ""|0) ;; *) REQUIRED=1 ;; esac
export LOOM_GPU_REQUIRED=$REQUIRED
BUDGET=${CHECK_BUDGET_S:-230}
started=$(date +%s)
elapsed() { echo $(($(date +%s) - started)); }
step() { echo; echo "== $* ($(elapsed) s)"; }
# One JSON line for a step's outcome, appended at once.
record() {  # name status [extra json fields, without braces]
  printf '{"bench": "gpu", "metric": "step", "step": "%s", "status": "%s"%s}\n' \
    "$1" "$2" "${3:+, $3}" >>"$RES"
}
failures=()
fail() { failures+=("$1"); echo "check.sh: FAILED: $1"; }
# run_limited NAME LIMIT CMD...: the command under `timeout -k 5`, with the limit cut to what
# is left of the budget (5 s kept for the summary); not started when under 10 s are left.
run_limited() {
  local name=$1 limit=$2
  shift 2
  local left=$((BUDGET - $(elapsed) - 5))
  if [ "$left" -lt 10 ]; then
    echo "-- $name: not started, $left s left of the ${BUDGET} s budget"
    record "$name" "not_run" "\"reason\": \"budget\""
    return 124
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0
  t0=$(date +%s)
  timeout -k 5 "$limit" "$@"
  local rc=$?
  local took=$(($(date +%s) - t0))
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && echo "-- $name: timed out after ${limit} s"
  record "$name" "$([ "$rc" -eq 0 ] && echo ok || echo "exit_$rc")" "\"seconds\": $took, \"limit_s\": $limit"
  return "$rc"
}

# ---- 1. the GPU ----
step "GPU"
GPU=0
if command -v nvidia-smi >/dev/null 2>&1 && timeout -k 2 20 nvidia-smi; then
  GPU=1
  timeout -k 2 10 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,compute_mode \
    --format=csv || true
else
  echo "NO GPU: nvidia-smi is missing or failed; no CUDA device to check."
  if [ "$REQUIRED" -eq 1 ]; then
    echo "LOOM_GPU_REQUIRED=1: this is a failure (the steps below run to show how it fails)."
  else
    echo "Dry run: the steps below run, every GPU test skips, and the exit status is 0."
    echo "Set LOOM_GPU_REQUIRED=1 to make a missing GPU a failure."
  fi
fi
record gpu "$([ $GPU -eq 1 ] && echo present || echo absent)" "\"required\": $REQUIRED"

# CUDA's libraries: the toolkit's, and PyTorch's pip wheels' as a fallback (NCCL may exist
# only there: nvidia-nccl-cu13; cuDNN, which loom loads at run time and does not carry, in
# nvidia-cudnn-cu1x).
libpath=/usr/local/cuda/lib64
for mod in nvidia.cublas nvidia.cuda_runtime nvidia.nccl nvidia.cudnn; do
  d=$(python3 -c "import $mod, os; print(os.path.join(list($mod.__path__)[0], 'lib'))" 2>/dev/null) &&
    libpath="$libpath:$d"
done
for lib in libnccl.so.2 libcublasLt.so.13 libcudart.so.13; do
  if ! ls /usr/local/cuda/lib64/$lib >/dev/null 2>&1; then
    d=$(python3 -c "import site; print(' '.join(site.getsitepackages()))" 2>/dev/null)
    f=$(find $d -name "$lib" 2>/dev/null | head -1)
    [ -n "$f" ] && libpath="$libpath:$(dirname "$f")"
  fi
done
export LD_LIBRARY_PATH="$libpath:${LD_LIBRARY_PATH:-}"

# ---- the binaries ----
step "binaries"
BIN=""
if [ -n "$BIN_DIR" ]; then
  BIN=$BIN_DIR
  echo "from $BIN"
elif [ -f build-gpu-carry/loom-gpu.tar.xz ]; then
  U=$(mktemp -d)
  python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
    build-gpu-carry/loom-gpu.tar.xz "$U"
  echo "unpacked build-gpu-carry/loom-gpu.tar.xz, revision $(cat "$U/REVISION" 2>/dev/null)"
  export LD_LIBRARY_PATH="$U/lib:$LD_LIBRARY_PATH"
  [ -d "$U/data" ] && export LOOM_FASHION_MNIST_DIR="${LOOM_FASHION_MNIST_DIR:-$U/data}"
  BIN="$U/bin"
elif [ "$WANT_BUILD" -eq 1 ]; then
  B=build-gpu
  if cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_CUDA=ON -DLOOM_MPI=OFF &&
     cmake --build "$B" -j16 --target loom_tensor_cuda_tests loom_gpu_bench loom; then
    BIN=$B
    started=$(date +%s)  # the budget is for the check, not the build
  fi
fi
# A binary in $BIN itself, or where a CMake build tree puts it.
find_bin() {
  local d
  for d in "$BIN" "$BIN/tests/tensor_cuda" "$BIN/bench/gpu" "$BIN/src/loom/cli"; do
    [ -f "$d/$1" ] && [ -x "$d/$1" ] && { echo "$d/$1"; return 0; }
  done
  return 1
}
TESTS_BIN=""; BENCH_BIN=""; LOOM_BIN=""
if [ -n "$BIN" ]; then
  TESTS_BIN=$(find_bin loom_tensor_cuda_tests)
  BENCH_BIN=$(find_bin loom_gpu_bench)
  LOOM_BIN=$(find_bin loom)
fi
if [ -z "$TESTS_BIN" ] || [ -z "$BENCH_BIN" ]; then
  echo "check.sh: no binaries: give --bin DIR (loom_tensor_cuda_tests, loom_gpu_bench), carry"
  echo "build-gpu-carry/loom-gpu.tar.xz (bench/gpu/pack.sh), or pass --build"
  record binaries missing
  exit 3
fi
bins=("$TESTS_BIN" "$BENCH_BIN")
[ -n "$LOOM_BIN" ] && bins+=("$LOOM_BIN")
printf '  %s\n' "${bins[@]}"

step "libraries (ldd)"
missing=0
for b in "${bins[@]}"; do
  nf=$(ldd "$b" 2>&1 | grep "not found")
  if [ -n "$nf" ]; then
    echo "$b:"
    echo "$nf"
    missing=1
  fi
done
for b in "${bins[@]}"; do
  ldd "$b" 2>/dev/null | grep -E "lib(nccl|cudart|cublas|cublasLt)\.so" | sed "s|^|  $(basename "$b"): |"
done | sort -u
if [ "$missing" -ne 0 ]; then
  echo "check.sh: a library is not found (above); nothing was run. LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  record libraries missing
  exit 4
fi
record libraries ok

# ---- 2. versions and NCCL start-up ----
step "versions and NCCL start-up (limit 60 s)"
NCCL_DEBUG=WARN run_limited info 60 "$BENCH_BIN" --parts info,nccl --json "$RES" ||
  fail "info and NCCL start-up (loom_gpu_bench --parts info,nccl)"

# cuDNN is not carried (hundreds of MB): the binaries load this machine's, when it has one.
# loom_gpu_bench's info line says whether it runs ("cudnn 9.x.y") or why not.
cudnn=$(python3 - "$RES" <<'PY' 2>/dev/null
import json, sys
for l in open(sys.argv[1]):
    if '"metric": "info"' in l:
        print(json.loads(l).get("cudnn", "not reported"))
        break
else:
    print("not reported (no info line)")
PY
)
echo "cuDNN: $cudnn"
record cudnn "$(case "$cudnn" in cudnn*) echo runs ;; *) echo unavailable ;; esac)"

# ---- 3. the tests ----
step "GPU tests"
# Expected skips with a GPU: the no-GPU message tests always; the training test without
# Fashion-MNIST; the cuDNN convolution tests where cuDNN does not run (above). Any other skip
# means a test did not run: a failure.
expected_skips="CudaBackendSetup.NoGpuIsAConfigErrorNamingTheCause CudnnBuild.NoGpuHandleErrorNamesTheCall"
if [ -z "${LOOM_FASHION_MNIST_DIR:-}" ] || [ ! -e "${LOOM_FASHION_MNIST_DIR}/train-images-idx3-ubyte.gz" ]; then
  expected_skips="$expected_skips NcclTraining.OneGpuWorkerMatchesTheCpuRun"
  expected_skips="$expected_skips NcclTraining.LowPrecisionTrainsAsFp32Does"
fi
case "$cudnn" in
  cudnn*) ;;
  *) expected_skips="$expected_skips CudaLayerOps.ConvolutionOnCudnnMatchesCpu"
     expected_skips="$expected_skips CudaLayerOps.ConvolutionCudnnDeclinesAnOutputSizeItWouldNotCompute"
     expected_skips="$expected_skips CudnnBuild.DescriptorsGiveTheOutputSizeOfPyTorchsRule"
     expected_skips="$expected_skips CudaPrecision.ConvolutionOnCudnnInLowPrecisionMatchesCpu" ;;
esac
echo "expected skips: $expected_skips"
groups=(
  "setup|CudaCheck.*:CudaPool.*:CudaBackendSetup.*:CudaStreams.*:CudnnBuild.*|30"
  "ops|CudaOps.*:CudaLayerOps.*:CudaModel.*|60"
  "precision|CudaPrecision.*|30"
  "codecs|CudaCodecs.*|30"
  "multirank|CudaMultiRank.*|40"
  "nccl|Nccl.*|60"
  "training|NcclTraining.*|75"
)
for g in "${groups[@]}"; do
  IFS='|' read -r name filter limit <<<"$g"
  echo "-- $name ($filter, limit $limit s)"
  CUDA_LAUNCH_BLOCKING=1 NCCL_DEBUG=WARN run_limited "tests_$name" "$limit" \
    "$TESTS_BIN" --gtest_filter="$filter" --gtest_brief=1 --gtest_output="json:$W/tests_$name.json"
  rc=$?
  echo "-- $name: exit code $rc"
  [ "$rc" -ne 0 ] && fail "test group $name (exit $rc)"
  # Its tests as JSON lines now, so a later hang does not lose them (a group that crashed or
  # hung leaves no gtest JSON; the log has its output).
  python3 - "$RES" "$W/tests_$name.json" "$name" <<'PY' || true
import json, sys
res, path, group = sys.argv[1:4]
try:
    doc = json.load(open(path))
except Exception as e:
    print(f"  {group}: no gtest JSON ({e})")
    sys.exit(0)
with open(res, "a") as out:
    for suite in doc.get("testsuites", []):
        for t in suite.get("testsuite", []):
            skipped = t.get("result") in ("SKIPPED", "SUPPRESSED") or t.get("status") == "NOTRUN"
            status = "skipped" if skipped else ("failed" if t.get("failures") else "passed")
            out.write(json.dumps({"bench": "gpu", "metric": "test", "group": group, "status": status,
                                  "test": f"{suite['name']}.{t['name']}"}) + "\n")
PY
done
# Skips: with a GPU, only the expected ones; without one (a dry run), every test skips.
skips=$(python3 - "$RES" "$expected_skips" "$GPU" <<'PY'
import json, sys
res, expected, gpu = sys.argv[1], set(sys.argv[2].split()), sys.argv[3] == "1"
tests = [json.loads(l) for l in open(res) if '"metric": "test"' in l]
skipped = sorted(t["test"] for t in tests if t["status"] == "skipped")
unexpected = [t for t in skipped if t not in expected] if gpu else []
print(f"{len(tests)} tests, {sum(t['status'] == 'passed' for t in tests)} passed, "
      f"{sum(t['status'] == 'failed' for t in tests)} failed, {len(skipped)} skipped "
      f"(expected with a GPU: {len(expected)})")
for t in unexpected:
    print(f"  unexpected skip: {t}")
print(f"UNEXPECTED={len(unexpected)}")
PY
)
echo "$skips" | grep -v '^UNEXPECTED='
unexpected=$(echo "$skips" | sed -n 's/^UNEXPECTED=//p')
if [ "${unexpected:-0}" -ne 0 ]; then
  fail "$unexpected test(s) skipped that must run on a GPU"
fi

# ---- 4. the trimmed benchmark ----
step "benchmark (trimmed)"
NCCL_DEBUG=WARN run_limited bench 60 "$BENCH_BIN" --parts mlp,gemm,conv,bandwidth,codecs \
  --warmup 10 --steps 60 --gemm-size 4096 --gemm-reps 10 --conv-reps 5 --copy-mib 256 \
  --copy-reps 10 --tf32 \
  --json "$RES" || fail "benchmark"

# ---- 5. optional comparisons ----
if [ "$WANT_TORCH" -eq 1 ]; then
  step "PyTorch eager, same model and batch"
  for flag in "" --tf32; do
    run_limited "torch${flag}" 50 python3 bench/gpu/torch_mlp_gpu.py $flag | tee "$W/torch.out"
    grep '^{' "$W/torch.out" >>"$RES" || true
  done
fi
if [ "$WANT_TRAIN" -eq 1 ]; then
  step "loom train on the nccl transport (1 GPU, 1 worker)"
  if [ -n "${LOOM_FASHION_MNIST_DIR:-}" ] && [ -n "$LOOM_BIN" ]; then
    NCCL_DEBUG=WARN run_limited train 60 "$LOOM_BIN" train --set transport='"nccl"' \
      --set backend='"cuda"' --set data.dir="\"$LOOM_FASHION_MNIST_DIR\"" --set batch=1024 \
      --set epochs=4 --set progress='"none"' --set output.dir="\"$W/train\"" \
      --set mlp.hidden='[1024, 1024]' 2>&1 | tee "$W/train.out"
    [ "${PIPESTATUS[0]}" -ne 0 ] && fail "loom train on nccl"
    python3 - "$W/train.out" "$RES" <<'PY' || true
import json, re, sys
sps = [float(m.group(1)) for m in re.finditer(r"epoch \d+/\d+:.*?([0-9.]+) samples/s", open(sys.argv[1]).read())]
if sps:  # the last epoch's (the first includes start-up)
    with open(sys.argv[2], "a") as out:
        out.write(json.dumps({"bench": "gpu", "metric": "loom train nccl samples/s", "op": "train_nccl",
                              "value": sps[-1], "unit": "samples/s", "epochs": sps}) + "\n")
PY
  else
    echo "not run: no Fashion-MNIST (LOOM_FASHION_MNIST_DIR; pack.sh carries its test set) or no loom binary"
    record train not_run "\"reason\": \"no data or no loom binary\""
  fi
fi

# ---- summary ----
step "summary"
status=0
if [ "$GPU" -eq 0 ] && [ "$REQUIRED" -eq 1 ]; then
  status=2
  fail "no GPU (LOOM_GPU_REQUIRED=1)"
elif [ "$GPU" -eq 1 ] && [ "${#failures[@]}" -gt 0 ]; then
  status=1
elif [ "$GPU" -eq 0 ] && [ "${#failures[@]}" -gt 0 ]; then
  # Without a GPU every step skips; a failure here is the script's or the binaries' own.
  status=1
fi
python3 - "$RES" "$GPU" "$REQUIRED" "$status" "$(elapsed)" "${failures[@]+"${failures[@]}"}" <<'PY' | tee -a "$SUMMARY"
import json, sys
path, gpu, required, status, seconds = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1", int(sys.argv[4]), int(sys.argv[5])
failures = sys.argv[6:]
rows = []
for l in open(path):
    if l.startswith("{"):
        try:
            rows.append(json.loads(l))
        except ValueError:
            pass
def pick(**kw):
    for r in rows:
        if all(r.get(k) == v for k, v in kw.items()):
            return r.get("value")
    return None
tests = [r for r in rows if r.get("metric") == "test"]
info = next((r for r in rows if r.get("metric") == "info"), {})
summary = {"bench": "gpu", "metric": "summary", "gpu": gpu, "gpu_required": required,
           "passed": status == 0 and gpu, "exit_status": status, "seconds": seconds,
           "failures": failures,
           "tests": {s: sum(1 for t in tests if t["status"] == s) for s in ("passed", "failed", "skipped")},
           "tests_failed": [t["test"] for t in tests if t["status"] == "failed"],
           "device": info.get("device"), "cuda_driver": info.get("cuda_driver"),
           "cuda_runtime": info.get("cuda_runtime"), "cudnn": info.get("cudnn"),
           "nccl_startup_s": pick(op="nccl_startup")}
for prec in ("fp32", "tf32"):
    loom = pick(framework="loom", precision=prec)
    summary[f"mlp_{prec}_loom_samples_per_s"] = loom
    for sync in ("none", "loss"):
        torch = pick(framework="torch", precision=prec, sync=sync)
        if loom and torch:
            summary[f"mlp_{prec}_loom_over_torch_sync_{sync}"] = loom / torch
summary["copy_GBps"] = pick(op="copy")
summary["relu_fraction_of_copy"] = next((r.get("fraction_of_copy") for r in rows if r.get("op") == "relu"), None)
for r in rows:
    if r.get("op") == "codec":
        summary[f"codec_{r['codec']}_{r['direction']}_fraction_of_copy"] = r.get("fraction_of_copy")
for r in rows:
    if r.get("op") == "conv":
        engine = "cudnn" if str(r.get("engine", "")).startswith("cudnn") else "loom"
        summary[f"conv_{engine}_{r['shape'].replace(' ', '_')}_TFLOPs"] = r.get("value")
summary["loom_train_nccl_samples_per_s"] = pick(op="train_nccl")
summary["gemm_fp32_TFLOPs"] = pick(op="gemm", precision="fp32")
summary["gemm_tf32_TFLOPs"] = pick(op="gemm", precision="tf32")
for k, v in summary.items():
    print(f"  {k:<44} {v}")
with open(path, "a") as f:
    f.write(json.dumps(summary) + "\n")
PY
if [ "$GPU" -eq 0 ] && [ "$status" -eq 0 ]; then
  echo "NO GPU: nothing was checked on a device (dry run; LOOM_GPU_REQUIRED=1 makes this a failure)."
elif [ "$status" -eq 0 ]; then
  echo "PASSED"
else
  echo "FAILED (exit $status):"
  printf '  %s\n' "${failures[@]}"
fi
echo "results in $OUT ($(elapsed) s)"
rm -rf "$W"
exit "$status"
