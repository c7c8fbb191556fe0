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

// tuned: OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=PASSIVE (the peer's best here).
PeerResult run_torch_peer(const std::string& script, int threads, int epochs, bool tuned,
                          int timeout_s = 300);

}  // namespace loom::experiments
