// Runs the PyTorch peer (bench/peers/torch_mlp.py: the same MLP, recipe and data) as a child
// process in the same benchmark run, so loom's figures come with a same-run ratio. PyTorch
// comes from scripts/setup-bench (python3-torch, seen from the checkout's .venv).
#pragma once

#include <string>

namespace loom::experiments {

struct PeerResult {
  bool ran = false;
  std::string label;  // "pytorch 1 thread (OpenBLAS as detected)"
  double samples_per_s = 0;
  double test_acc = -1;
  std::string message;  // why it did not run, or the RESULT line
};

// The peer script: $LOOM_TORCH_PEER, else bench/peers/torch_mlp.py of the checkout that holds
// this executable, else share/loom/peers/torch_mlp.py of the prefix it is installed in. Empty
// if none is found.
std::string find_torch_peer();
// The python that runs it: $LOOM_PYTHON, else the checkout's .venv (scripts/setup-bench), else
// /usr/bin/python3 (Debian's python3-torch).
std::string find_python(const std::string& script);

// The OpenBLAS kernels the tuned peer asks for (OPENBLAS_CORETYPE), from the CPU's ISA:
// SkylakeX with AVX-512, Zen on an AMD CPU with AVX2 and FMA, Haswell on another, and none
// below that. Debian's OpenBLAS 0.3.21 gives a CPU model it does not know Prescott's SSE3
// kernels (docs/gemm.md), hence the preset; asking for kernels the CPU lacks (SkylakeX on an
// AVX2-only CPU) kills the peer with SIGILL.
std::string openblas_core_type(bool avx512, bool avx2_fma, bool amd);
// The same for this CPU; LOOM_MAX_CPU_ISA=avx2 caps it as it caps loom's own kernels.
std::string openblas_core_type_here();

// tuned: OPENBLAS_CORETYPE=openblas_core_type_here() (where there is one) and
// OMP_WAIT_POLICY=PASSIVE, the peer's best.
PeerResult run_torch_peer(const std::string& script, int threads, int epochs, bool tuned,
                          int timeout_s = 300);

}  // namespace loom::experiments
