#!/usr/bin/env bash
# Builds the GPU test and benchmark binaries and loom itself HERE (a machine with nvcc but no GPU) and packs
# them, with the shared libraries they need that a CUDA image may lack (oneDNN, OpenBLAS, fmt,
# toml++, libgomp, ...), into build-gpu-carry/loom-gpu.tar.xz (about 15-20 MB): small enough to
# carry to a GPU machine that has no Debian packages, where check.sh unpacks and runs it.
# Libraries every machine has (glibc, libstdc++) and CUDA's own (cudart, cuBLAS, driver) stay.
# cuDNN is not linked (the CUDA backend loads it at run time, where the machine has it) and not
# carried: its engine libraries are hundreds of MB.
#   bench/gpu/pack.sh            # uses build-cuda/ (LOOM_BUILD_DIR to change)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${LOOM_BUILD_DIR:-build-cuda}
if [ ! -f "$B/build.ninja" ]; then
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_CUDA=ON
fi
cmake --build "$B" -j "${LOOM_JOBS:-2}" --target loom_tensor_cuda_tests loom_gpu_bench loom
D=build-gpu-carry
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$D"
# Where the build tree puts them (each unit's and test folder's own directory).
cp "$B/tests/tensor_cuda/loom_tensor_cuda_tests" "$B/bench/gpu/loom_gpu_bench" \
  "$B/src/loom/cli/loom" "$stage/bin/"
# Fashion-MNIST's test set (4.4 MB), also linked as the training set: enough for the GPU
# machine's nccl training test and `loom train` figure (it has no datasets).
FM=${LOOM_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
if [ -f "$FM/t10k-images-idx3-ubyte.gz" ]; then
  mkdir -p "$stage/data"
  cp "$FM/t10k-images-idx3-ubyte.gz" "$FM/t10k-labels-idx1-ubyte.gz" "$stage/data/"
  ln -s t10k-images-idx3-ubyte.gz "$stage/data/train-images-idx3-ubyte.gz"
  ln -s t10k-labels-idx1-ubyte.gz "$stage/data/train-labels-idx1-ubyte.gz"
fi
skip='^(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux.*|linux-vdso|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so'
for bin in "$stage"/bin/*; do
  ldd "$bin" | awk '/=>/ && $3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  name=$(basename "$lib")
  if ! [[ $name =~ $skip ]]; then cp -L "$lib" "$stage/lib/$name"; fi
done
git rev-parse --short HEAD >"$stage/REVISION" 2>/dev/null || echo unknown >"$stage/REVISION"
XZ_OPT="${XZ_OPT:--4 -T2}" tar -C "$stage" -cJf "$D/loom-gpu.tar.xz" bin lib REVISION \
  $([ -d "$stage/data" ] && echo data)
ls -la "$D/loom-gpu.tar.xz"
echo "carry build-gpu-carry to the GPU machine and run: LOOM_GPU_REQUIRED=1 bash bench/gpu/check.sh"
