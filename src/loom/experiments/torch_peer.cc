#include "loom/experiments/torch_peer.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>

namespace loom::experiments {


namespace fs = std::filesystem;

std::string find_torch_peer() {
  if (const char* env = std::getenv("LOOM_TORCH_PEER")) return fs::exists(env) ? env : "";
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  // build/loom -> repo -> ../shared/peers
  for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path();
       dir = dir.parent_path()) {
    for (const fs::path& candidate :
         {dir / "shared/peers/torch_mlp.py", dir.parent_path() / "shared/peers/torch_mlp.py"})
      if (fs::exists(candidate)) return candidate.string();
  }
  return "";
}

PeerResult run_torch_peer(const std::string& script, int threads, int epochs, bool tuned,
                          int timeout_s) {
  PeerResult r;
  r.label = fmt::format("pytorch {} thread{} ({})", threads, threads == 1 ? "" : "s",
                        tuned ? "OpenBLAS tuned: SkylakeX kernels" : "out of the box");
  if (script.empty()) {
    r.message = "peer script not found (set LOOM_TORCH_PEER)";
    return r;
  }
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    r.message = "python3-torch is not installed (apt-get install python3-torch)";
    return r;
  }
  const std::string env = tuned ? "OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=PASSIVE" : "";
  const std::string cmd = fmt::format(
      "timeout {} env {} /usr/bin/python3 '{}' --threads {} "
      "--epochs {} 2>&1",
      timeout_s, env, script, threads, epochs);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) {
    r.message = "cannot start python3";
    return r;
  }
  std::string out;
  std::array<char, 4096> buf;
  while (fgets(buf.data(), int(buf.size()), pipe)) out += buf.data();
  const int status = pclose(pipe);
  std::smatch m;
  static const std::regex result_re(
      "RESULT .*median_samples_per_s=([0-9.]+) final_test_acc=([0-9.]+)");
  if (std::regex_search(out, m, result_re)) {
    r.ran = true;
    r.samples_per_s = std::stod(m[1]);
    r.test_acc = std::stod(m[2]);
    r.message = m[0];
  } else {
    r.message = fmt::format("peer failed (status {}): {}", WEXITSTATUS(status),
                            out.substr(out.size() > 400 ? out.size() - 400 : 0));
  }
  return r;
}

}  // namespace loom::experiments
