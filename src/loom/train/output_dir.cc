#include "loom/train/output_dir.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "loom/core/error.h"

namespace loom::train {

namespace fs = std::filesystem;

namespace {
// What a run leaves in its output.dir (run_writer.h, checkpoint.h); the temporaries too, so a
// run cut short while renaming counts as a run.
const char* const kRunResults[] = {"config.toml",
                                   "metrics.jsonl",
                                   "summary.json",
                                   "model.safetensors",
                                   "model.best.safetensors",
                                   "checkpoints",
                                   "tb",
                                   "metrics.jsonl.tmp",
                                   "summary.json.tmp"};
constexpr const char* kNumberToken = "{n}";

// "runs/mlp/" -> "runs/mlp", for suggestions built from the name.
std::string plain(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  return p.string();
}
}  // namespace

std::vector<std::string> run_results_in(const std::string& dir) {
  std::vector<std::string> found;
  if (dir.empty()) return found;
  std::error_code ec;
  for (const char* name : kRunResults)
    if (fs::exists(fs::path(dir) / name, ec)) found.push_back(name);
  return found;
}

std::string numbered_output_dir(const std::string& pattern) {
  const size_t at = pattern.find(kNumberToken);
  if (at == std::string::npos) return pattern;
  for (int64_t n = 1; n < 1000000; ++n) {
    std::string dir = pattern;
    dir.replace(at, 3, std::to_string(n));
    if (run_results_in(dir).empty()) return dir;
  }
  throw ConfigError(fmt::format("output.dir \"{}\": no free number below 1000000", pattern));
}

std::string resume_run_dir(const std::string& resume_path) {
  const fs::path p = plain(resume_path);
  std::error_code ec;
  fs::path run = p;
  if (fs::exists(p / "train.ckpt", ec))
    run = p.parent_path().parent_path();
  else if (!fs::is_directory(p / "checkpoints", ec) && p.filename() == "checkpoints")
    run = p.parent_path();
  return run.empty() ? std::string(".") : run.string();
}

bool same_dir(const std::string& a, const std::string& b) {
  std::error_code ec1, ec2;
  const fs::path x = fs::weakly_canonical(fs::absolute(a), ec1);
  const fs::path y = fs::weakly_canonical(fs::absolute(b), ec2);
  if (ec1 || ec2) return fs::path(a).lexically_normal() == fs::path(b).lexically_normal();
  return x == y;
}

void refuse_existing_run(const std::string& dir, const std::string& where) {
  const std::vector<std::string> found = run_results_in(dir);
  if (found.empty()) return;
  const bool resumable = std::find(found.begin(), found.end(), "checkpoints") != found.end();
  throw ConfigError(fmt::format(
      "{}: output.dir \"{}\" already holds a run ({}); loom does not overwrite it. {} "
      "with `loom train --force`, or write elsewhere: `--set output.dir=\"{}-{{n}}\"` takes the "
      "next free number",
      where, dir, fmt::join(found, ", "),
      resumable ? fmt::format("Resume it with `loom train --resume {}`, replace it", dir)
                : std::string("Replace it"),
      plain(dir)));
}

void clear_run_results(const std::string& dir) {
  for (const std::string& name : run_results_in(dir)) {
    std::error_code ec;
    fs::remove_all(fs::path(dir) / name, ec);
    if (ec)
      throw InputError(fmt::format("{}/{}: cannot remove the earlier run's file (--force): {}", dir,
                                   name, ec.message()));
  }
}

}  // namespace loom::train
