#include "loom/experiments/torch_peer.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <array>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "loom/core/cpu_features.h"

namespace loom::experiments {

namespace fs = std::filesystem;

std::string find_torch_peer() {
  if (const char* env = std::getenv("LOOM_TORCH_PEER")) return fs::exists(env) ? env : "";
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  // A build tree inside a checkout (build/src/loom/cli/loom -> bench/peers/), or an installed
  // loom (PREFIX/bin/loom -> PREFIX/share/loom/peers/, `cmake --install`).
  for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    for (const fs::path& candidate :
         {dir / "bench/peers/torch_mlp.py", dir / "share/loom/peers/torch_mlp.py"})
      if (fs::exists(candidate, ec)) return candidate.string();
    if (dir == dir.root_path()) break;
  }
  return "";
}

namespace {

// CHECKOUT/NAME/bin/python for the peer script CHECKOUT/bench/peers/X.py, where
// scripts/setup-bench made that venv; empty otherwise.
std::string checkout_venv_python(const std::string& script, const std::string& name) {
  if (script.empty()) return "";
  const fs::path python =
      fs::path(script).parent_path().parent_path().parent_path() / name / "bin/python";
  std::error_code ec;
  return fs::exists(python, ec) ? python.string() : "";
}

// LOOM_PYTHON when set to something; empty counts as unset, as the bench scripts treat it.
const char* python_from_env() {
  const char* env = std::getenv("LOOM_PYTHON");
  return env && *env ? env : nullptr;
}

}  // namespace

std::string find_python(const std::string& script) {
  if (const char* env = python_from_env()) return env;
  const std::string venv = checkout_venv_python(script, ".venv");
  return venv.empty() ? "/usr/bin/python3" : venv;
}

std::vector<std::string> find_pythons(const std::string& script) {
  std::vector<std::string> pythons = {find_python(script)};
  if (python_from_env()) return pythons;
  const std::string current = checkout_venv_python(script, ".venv-torch");
  if (!current.empty()) pythons.push_back(current);
  return pythons;
}

bool has_torch_compile(const std::string& version) {
  // The major version: the digits before the first dot ("2.15.0+cu132", "1.13.0a0").
  int major = 0;
  const auto [end, ec] = std::from_chars(version.data(), version.data() + version.size(), major);
  return ec == std::errc() && end != version.data() && major >= 2;
}

std::string openblas_core_type(bool avx512, bool avx2_fma, bool amd) {
  if (avx512) return "SkylakeX";
  if (avx2_fma) return amd ? "Zen" : "Haswell";
  return "";
}

std::string openblas_core_type_here() {
  const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return openblas_core_type(cpu_has_avx512(), avx2_fma, __builtin_cpu_is("amd"));
}

PeerResult run_torch_peer(const std::string& script, const PeerRun& how, int threads, int epochs,
                          int timeout_s) {
  PeerResult r;
  const std::string core = how.tuned ? openblas_core_type_here() : "";
  const std::string preset = !how.tuned     ? "out of the box"
                             : core.empty() ? "OpenBLAS as detected, passive OpenMP waits"
                                            : "OpenBLAS tuned: " + core + " kernels";
  const std::string python = how.python.empty() ? find_python(script) : how.python;
  const auto label = [&](const std::string& version) {
    return fmt::format("pytorch {} {} thread{} ({}{})", version, threads, threads == 1 ? "" : "s",
                       preset, how.compile ? ", compiled" : "");
  };
  r.label = label(python);
  if (script.empty()) {
    r.message =
        "peer script not found: it is bench/peers/torch_mlp.py of the checkout (or "
        "share/loom/peers/ of an installed loom); set LOOM_TORCH_PEER to its path";
    return r;
  }
  if (std::system(fmt::format("'{}' -c 'import torch' >/dev/null 2>&1", python).c_str()) != 0) {
    r.message = fmt::format(
        "PyTorch is not installed for {}: run scripts/setup-bench in loom's checkout (it "
        "installs python3-torch and a .venv that sees it), or apt-get install python3-torch, "
        "or set LOOM_PYTHON to a python that has torch",
        python);
    return r;
  }
  std::string env;
  if (!core.empty()) env += "OPENBLAS_CORETYPE=" + core + " ";
  if (how.tuned) env += "OMP_WAIT_POLICY=PASSIVE";
  const std::string cmd =
      fmt::format("timeout {} env {} '{}' '{}' --threads {} --epochs {}{} 2>&1", timeout_s, env,
                  python, script, threads, epochs, how.compile ? " --compile" : "");
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
      "RESULT .*median_samples_per_s=([0-9.]+) final_test_acc=([0-9.]+).* torch=([^ \n]+)");
  if (std::regex_search(out, m, result_re)) {
    r.ran = true;
    r.samples_per_s = std::stod(m[1]);
    r.test_acc = std::stod(m[2]);
    r.torch_version = m[3];
    r.label = label(r.torch_version);
    r.message = m[0];
  } else {
    r.message = fmt::format("peer failed (status {}): {}", WEXITSTATUS(status),
                            out.substr(out.size() > 400 ? out.size() - 400 : 0));
  }
  return r;
}

}  // namespace loom::experiments
