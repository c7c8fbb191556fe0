#include "loom/train/run_writer.h"

#include <filesystem>

#include "loom/core/error.h"

namespace loom::train {

namespace fs = std::filesystem;

RunWriter::RunWriter(const std::string& dir) : dir_(dir) {
  if (dir_.empty()) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec)
    throw InputError(fmt::format("{}: cannot create output directory: {}", dir_, ec.message()));
  metrics_.open(fs::path(dir_) / "metrics.jsonl", std::ios::trunc);
  if (!metrics_) throw InputError(fmt::format("{}/metrics.jsonl: cannot write", dir_));
}

void RunWriter::write_config(const std::string& canonical_text) {
  if (!enabled()) return;
  std::ofstream out(fs::path(dir_) / "config.toml", std::ios::trunc);
  out << canonical_text;
}

void RunWriter::append_metrics(const nlohmann::json& line) {
  if (!enabled()) return;
  metrics_ << line.dump() << '\n';
  metrics_.flush();
}

void RunWriter::write_summary(const nlohmann::json& summary) {
  if (!enabled()) return;
  const fs::path tmp = fs::path(dir_) / "summary.json.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << summary.dump(2) << '\n';
    if (!out) throw InputError(fmt::format("{}: cannot write", tmp.string()));
  }
  fs::rename(tmp, fs::path(dir_) / "summary.json");
}

}  // namespace loom::train
