#!/usr/bin/env bash
# The device check: on a machine with a GPU, get loom's CUDA binaries, run every GPU-vs-CPU op
# test, then benchmark MLP training (loom vs PyTorch eager, same GPU, batch 1024), fp32/TF32
# GEMM and device copy bandwidth. Finishes in a few minutes (hard limits below add to < 8).
# Results go under $OUT (default ./out): check.log (everything printed), gpu_tests.json (gtest),
# results.jsonl (one JSON object per figure, then a summary object).
#
# Binaries: from build-gpu-carry/loom-gpu.tar.xz when present (made by bench/gpu/pack.sh on a
# machine with the Debian dependencies), else built here with CMake (Release, -j16).
#   bash bench/gpu/check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-./out}
mkdir -p "$OUT"
LOG="$OUT/check.log"
RES="$OUT/results.jsonl"
: >"$RES"
exec > >(tee "$LOG") 2>&1
started=$(date +%s)
step() { echo; echo "== $* ($(($(date +%s) - started)) s)"; }

step "GPU"
if ! nvidia-smi; then
  echo "check.sh: no GPU here (nvidia-smi failed); nothing to check"
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true

# CUDA's libraries: the toolkit's, and PyTorch's pip wheels' as a fallback.
libpath=/usr/local/cuda/lib64
for mod in nvidia.cublas nvidia.cuda_runtime nvidia.nccl; do
  d=$(python3 -c "import $mod, os; print(os.path.join(list($mod.__path__)[0], 'lib'))" 2>/dev/null) && libpath="$libpath:$d"
done

BIN=""
if [ -f build-gpu-carry/loom-gpu.tar.xz ]; then
  step "unpack carried binaries"
  U=$(mktemp -d)
  python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
    build-gpu-carry/loom-gpu.tar.xz "$U"
  echo "revision $(cat "$U/REVISION")"
  export LD_LIBRARY_PATH="$U/lib:$libpath:${LD_LIBRARY_PATH:-}"
  if "$U/bin/loom_gpu_bench" --help >/dev/null; then
    BIN="$U/bin"
  else
    ldd "$U/bin/loom_gpu_bench" | grep -i "not found" || true
    echo "carried binaries do not run here; building instead"
  fi
fi
if [ -z "$BIN" ]; then
  step "build (Release, -j16)"
  export LD_LIBRARY_PATH="$libpath:${LD_LIBRARY_PATH:-}"
  B=build-gpu
  if ! { cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_CUDA=ON -DLOOM_MPI=OFF &&
         timeout 300 cmake --build "$B" -j16 --target loom_tensor_cuda_tests loom_gpu_bench; }; then
    echo "check.sh: build failed (missing Debian dependencies? run bench/gpu/pack.sh where they are and carry build-gpu-carry)"
    exit 3
  fi
  BIN="$B"
fi

step "GPU tests (every op against the CPU backend)"
timeout 150 "$BIN/loom_tensor_cuda_tests" --gtest_output="json:$OUT/gpu_tests.json"
tests_rc=$?
echo "tests exit code $tests_rc"

step "loom benchmark"
timeout 150 "$BIN/loom_gpu_bench" --tf32 --json "$RES"
bench_rc=$?

step "PyTorch eager, same model and batch"
for flag in "" --tf32; do
  timeout 90 python3 bench/gpu/torch_mlp_gpu.py $flag | tee "$OUT/torch.out"
  grep '^{' "$OUT/torch.out" >>"$RES" || true
done

step "summary"
python3 - "$RES" "$tests_rc" "$bench_rc" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
path, tests_rc, bench_rc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = [json.loads(l) for l in open(path) if l.startswith("{")]
def pick(**kw):
    for r in rows:
        if all(r.get(k) == v for k, v in kw.items()):
            return r["value"]
    return None
summary = {"bench": "gpu", "metric": "summary", "tests_passed": tests_rc == 0,
           "bench_ok": bench_rc == 0}
for prec in ("fp32", "tf32"):
    loom = pick(framework="loom", precision=prec)
    for sync in ("none", "loss"):
        torch = pick(framework="torch", precision=prec, sync=sync)
        if loom and torch:
            summary[f"mlp_{prec}_loom_over_torch_sync_{sync}"] = loom / torch
    summary[f"mlp_{prec}_loom_samples_per_s"] = loom
copy = pick(op="copy")
summary["copy_GBps"] = copy
summary["relu_fraction_of_copy"] = next((r.get("fraction_of_copy") for r in rows if r.get("op") == "relu"), None)
for r in rows:
    if r.get("op") == "codec":
        summary[f"codec_{r['codec']}_{r['direction']}_fraction_of_copy"] = r.get("fraction_of_copy")
summary["gemm_fp32_TFLOPs"] = pick(op="gemm", precision="fp32")
summary["gemm_tf32_TFLOPs"] = pick(op="gemm", precision="tf32")
for k, v in summary.items():
    print(f"  {k:<44} {v}")
with open(path, "a") as f:
    f.write(json.dumps(summary) + "\n")
PY
echo "results in $OUT ($(($(date +%s) - started)) s)"
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
