// Runs the PyTorch peer (bench/peers/torch_mlp.py: the same MLP, recipe and data) as a child
// process in the same benchmark run, so loom's figures come with a same-run ratio. PyTorch
// comes from scripts/setup-bench (python3-torch, seen from the checkout's .venv).
#pragma once

#include <string>
#include <vector>

namespace loom::experiments {

struct PeerResult {
  bool ran = false;
  std::string label;          // "pytorch 2.9.1 1 thread (out of the box)"
  std::string torch_version;  // as the peer printed it; empty if it did not run
  double samples_per_s = 0;
  double test_acc = -1;
  std::string message;  // why it did not run, or the RESULT line
};

// How one peer run is made: which Python (so which PyTorch), and its preset.
struct PeerRun {
  std::string python;    // empty: find_python(script)
  bool tuned = false;    // OPENBLAS_CORETYPE=openblas_core_type_here(), OMP_WAIT_POLICY=PASSIVE
  bool compile = false;  // torch.compile on the model (PyTorch 2 and later)
};

// The peer script: $LOOM_TORCH_PEER, else bench/peers/torch_mlp.py of the checkout that holds
// this executable, else share/loom/peers/torch_mlp.py of the prefix it is installed in. Empty
// if none is found.
std::string find_torch_peer();
// The python that runs it: $LOOM_PYTHON, else the checkout's .venv (scripts/setup-bench), else
// /usr/bin/python3 (Debian's python3-torch).
std::string find_python(const std::string& script);
// Every PyTorch to compare with: find_python(script), then the checkout's .venv-torch
// (scripts/setup-bench: the newest PyTorch from PyPI) where it exists. $LOOM_PYTHON alone when
// set.
std::vector<std::string> find_pythons(const std::string& script);
// Whether a PyTorch version ("2.9.1+cu128", "1.13.0a0") has torch.compile: 2 and later.
bool has_torch_compile(const std::string& version);

// The OpenBLAS kernels the tuned peer asks for (OPENBLAS_CORETYPE), from the CPU's ISA:
// SkylakeX with AVX-512, Zen on an AMD CPU with AVX2 and FMA, Haswell on another, and none
// below that. Debian's OpenBLAS 0.3.21 gives a CPU model it does not know Prescott's SSE3
// kernels (docs/gemm.md), hence the preset; asking for kernels the CPU lacks (SkylakeX on an
// AVX2-only CPU) kills the peer with SIGILL.
std::string openblas_core_type(bool avx512, bool avx2_fma, bool amd);
// The same for this CPU; LOOM_MAX_CPU_ISA=avx2 caps it as it caps loom's own kernels.
std::string openblas_core_type_here();

PeerResult run_torch_peer(const std::string& script, const PeerRun& how, int threads, int epochs,
                          int timeout_s = 300);

}  // namespace loom::experiments
