#!/usr/bin/env bash
# The device check: on a machine with a GPU, get loom's CUDA binaries, run every GPU-vs-CPU op
# and codec test (and the NCCL transport's), then benchmark MLP training (loom vs PyTorch
# eager, same GPU, batch 1024), fp32/TF32 GEMM, device copy bandwidth and the codec kernels,
# and time `loom train` on the nccl transport. Finishes in a few minutes; the per-part limits
# below add to about 7 (415 s, plus unpacking), and a part that fails or times out loses only
# its own figures.
# Results go under $OUT (default ./out), three files: check.log (everything printed),
# results.jsonl (one JSON object per test and per figure, then a summary object), summary.txt.
#
# Binaries: from build-gpu-carry/loom-gpu.tar.xz when present (made by bench/gpu/pack.sh on a
# machine with the Debian dependencies), else built here with CMake (Release, -j16).
#   bash bench/gpu/check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-./out}
mkdir -p "$OUT"
LOG="$OUT/check.log"
# Intermediate files stay out of $OUT: the device tool returns at most 8 files from it.
W=$(mktemp -d)
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

# CUDA's libraries: the toolkit's, and PyTorch's pip wheels' as a fallback (NCCL may exist only
# there: nvidia-nccl-cu13).
libpath=/usr/local/cuda/lib64
for mod in nvidia.cublas nvidia.cuda_runtime nvidia.nccl; do
  d=$(python3 -c "import $mod, os; print(os.path.join(list($mod.__path__)[0], 'lib'))" 2>/dev/null) && libpath="$libpath:$d"
done
for lib in libnccl.so.2 libcublasLt.so.13 libcudart.so.13; do
  if ! ls /usr/local/cuda/lib64/$lib >/dev/null 2>&1; then
    d=$(python3 -c "import site; print(' '.join(site.getsitepackages()))" 2>/dev/null)
    f=$(find $d -name "$lib" 2>/dev/null | head -1)
    [ -n "$f" ] && libpath="$libpath:$(dirname "$f")"
  fi
done
echo "library path: $libpath"

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
    [ -d "$U/data" ] && export LOOM_FASHION_MNIST_DIR="$U/data"
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
         timeout 300 cmake --build "$B" -j16 --target loom_tensor_cuda_tests loom_gpu_bench loom; }; then
    echo "check.sh: build failed (missing Debian dependencies? run bench/gpu/pack.sh where they are and carry build-gpu-carry)"
    exit 3
  fi
  BIN="$B"
fi

step "GPU tests (every op and codec against the CPU reference, NCCL, training)"
# In groups, each with its own time limit and gtest JSON, so a hang or crash in one (NCCL, say)
# loses only that group's results.
tests_rc=0
for group in "ops:CudaOps.*:CudaModel.*:CudaCheck.*:CudaPool.*:CudaBackendSetup.*:45" \
             "codecs:CudaCodecs.*:45" "nccl:Nccl.*:30" "training:NcclTraining.*:45"; do
  name=${group%%:*}
  rest=${group#*:}
  limit=${rest##*:}
  filter=${rest%:*}
  echo "-- $name ($filter, limit ${limit} s)"
  timeout "$limit" "$BIN/loom_tensor_cuda_tests" --gtest_filter="$filter" \
    --gtest_output="json:$W/gpu_tests_$name.json"
  rc=$?
  echo "-- $name: exit code $rc"
  [ "$rc" -ne 0 ] && tests_rc=$rc
done
echo "tests exit code $tests_rc"
# One JSON line per test for the summary (a group that crashed or hung leaves no gtest JSON:
# the log has its output, and the summary names the group).
python3 - "$RES" "$W"/gpu_tests_*.json <<'PY' || true
import json, sys
with open(sys.argv[1], "a") as out:
    for path in sys.argv[2:]:
        try:
            doc = json.load(open(path))
        except Exception as e:
            print(f"{path}: no gtest JSON ({e})"); continue
        for suite in doc.get("testsuites", []):
            for t in suite.get("testsuite", []):
                skipped = t.get("result") == "SKIPPED" or t.get("status") == "NOTRUN"
                status = "skipped" if skipped else ("failed" if t.get("failures") else "passed")
                out.write(json.dumps({"bench": "gpu", "metric": "test", "status": status,
                                      "test": f"{suite['name']}.{t['name']}"}) + "\n")
PY

step "loom benchmark"
timeout 100 "$BIN/loom_gpu_bench" --tf32 --json "$RES"
bench_rc=$?

step "PyTorch eager, same model and batch"
for flag in "" --tf32; do
  timeout 50 python3 bench/gpu/torch_mlp_gpu.py $flag | tee "$W/torch.out"
  grep '^{' "$W/torch.out" >>"$RES" || true
done

step "loom train on the nccl transport (1 GPU, 1 worker: NCCL needs a GPU per rank)"
train_rc=1
if [ -n "${LOOM_FASHION_MNIST_DIR:-}" ] && [ -x "$BIN/loom" ]; then
  timeout 50 "$BIN/loom" train --set transport='"nccl"' --set backend='"cuda"' \
    --set data.dir="\"$LOOM_FASHION_MNIST_DIR\"" --set batch=1024 --set epochs=4 \
    --set progress='"none"' --set output.dir="\"$W/train\"" --set mlp.hidden='[1024, 1024]' \
    2>&1 | tee "$W/train.out"
  train_rc=${PIPESTATUS[0]}
  python3 - "$W/train.out" "$RES" <<'PY' || true
import json, re, sys
sps = [float(m.group(1)) for m in re.finditer(r"epoch \d+/\d+:.*?([0-9.]+) samples/s", open(sys.argv[1]).read())]
if sps:  # the last epoch's (the first includes start-up)
    with open(sys.argv[2], "a") as out:
        out.write(json.dumps({"bench": "gpu", "metric": "loom train nccl samples/s", "op": "train_nccl",
                              "value": sps[-1], "unit": "samples/s", "epochs": sps}) + "\n")
PY
else
  echo "skipped: no carried data (bench/gpu/pack.sh packs Fashion-MNIST's test set) or no loom binary"
fi
echo "train exit code $train_rc"

step "summary"
python3 - "$RES" "$tests_rc" "$bench_rc" "$train_rc" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
path, tests_rc, bench_rc, train_rc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
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
            return r["value"]
    return None
tests = [r for r in rows if r.get("metric") == "test"]
summary = {"bench": "gpu", "metric": "summary", "tests_passed": tests_rc == 0,
           "tests": {s: sum(1 for t in tests if t["status"] == s) for s in ("passed", "failed", "skipped")},
           "tests_failed": [t["test"] for t in tests if t["status"] == "failed"],
           "bench_ok": bench_rc == 0, "train_nccl_ok": train_rc == 0}
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
summary["loom_train_nccl_samples_per_s"] = pick(op="train_nccl")
summary["gemm_fp32_TFLOPs"] = pick(op="gemm", precision="fp32")
summary["gemm_tf32_TFLOPs"] = pick(op="gemm", precision="tf32")
for k, v in summary.items():
    print(f"  {k:<44} {v}")
with open(path, "a") as f:
    f.write(json.dumps(summary) + "\n")
PY
echo "results in $OUT ($(($(date +%s) - started)) s)"
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ] && [ "$train_rc" -eq 0 ]
