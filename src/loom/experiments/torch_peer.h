// Runs the PyTorch peer (../shared/peers/torch_mlp.py: the same MLP, recipe and data) as a
// child process in the same benchmark run, so loom's figures come with a same-run ratio.
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

// The peer script: $LOOM_TORCH_PEER, else shared/peers/torch_mlp.py beside the repository that
// holds this executable. Empty if none is found.
std::string find_torch_peer();

// tuned: OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=PASSIVE (the peer's best here).
PeerResult run_torch_peer(const std::string& script, int threads, int epochs, bool tuned,
                          int timeout_s = 300);

}  // namespace loom::experiments
