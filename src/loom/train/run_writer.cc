#include "loom/train/run_writer.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "loom/core/error.h"
#include "loom/core/format_version.h"
#include "loom/core/io/atomic_file.h"

namespace loom::train {

namespace fs = std::filesystem;

std::optional<nlohmann::json> parse_metrics_line(const std::string& line,
                                                 const std::string& where) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (!j.is_object() || !j.contains("epoch")) return std::nullopt;
  check_format_version(j, kMetricsFormatVersion, "metrics", where);
  return j;
}

void check_summary_version(const nlohmann::json& summary, const std::string& path) {
  check_format_version(summary, kSummaryFormatVersion, "summary", path);
}

namespace {

// TensorBoard shows text as Markdown: indented four spaces, the config stays verbatim.
std::string as_code_block(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start && c != '\n') out += "    ";
    out += c;
    line_start = c == '\n';
  }
  return out;
}

}  // namespace

RunWriter::RunWriter(const std::string& dir, bool resuming) : dir_(dir), resuming_(resuming) {}

void RunWriter::open() {
  if (dir_.empty()) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec)
    throw InputError(fmt::format("{}: cannot create output directory: {}", dir_, ec.message()));
  metrics_.open(fs::path(dir_) / "metrics.jsonl", resuming_ ? std::ios::app : std::ios::trunc);
  if (!metrics_) throw InputError(fmt::format("{}/metrics.jsonl: cannot write", dir_));
  tb_.emplace((fs::path(dir_) / kTensorBoardDir).string());
}

void RunWriter::keep_epochs_through(int64_t epochs, int64_t steps) {
  if (!enabled()) return;
  const fs::path path = fs::path(dir_) / "metrics.jsonl";
  metrics_.close();
  std::string kept;
  std::vector<nlohmann::json> at_steps;  // the kept lines of step `steps` itself
  {
    std::ifstream in(path);
    std::string line;
    int64_t n = 0;
    while (std::getline(in, line)) {
      const auto j = parse_metrics_line(line, fmt::format("{}:{}", path.string(), ++n));
      if (!j) continue;
      const bool step_line = j->value("kind", "epoch") == "step";
      const char* key = step_line ? "step" : "epoch";
      if (j->contains(key) && (*j)[key].is_number_integer() &&
          (*j)[key].get<int64_t>() <= (step_line ? steps : epochs)) {
        kept += line + '\n';
        if (j->value("step", int64_t(-1)) == steps) at_steps.push_back(*j);
      }
    }
  }
  core::write_file_atomically(path.string(), kept);
  metrics_.open(path, std::ios::app);
  if (!metrics_) throw InputError(fmt::format("{}: cannot write", path.string()));
  // TensorBoard drops what the earlier event files hold from `steps` on: the steps after it,
  // which the resumed run logs again, and an epoch cut short at `steps`, whose line was dropped
  // above. The kept lines of that step go in again. (A histogram at `steps` is lost.)
  tb_step_ = steps;
  if (tb_) {
    tb_->restart_at(steps);
    for (const nlohmann::json& j : at_steps) log_scalars(j);
    tb_->flush();
  }
}

void RunWriter::write_config(const std::string& canonical_text) {
  if (!enabled()) return;
  core::write_file_atomically((fs::path(dir_) / "config.toml").string(), canonical_text);
  if (tb_) {
    tb_->text("config", tb_step_, as_code_block(canonical_text));
    tb_->flush();
  }
}

void RunWriter::append_metrics(const nlohmann::json& line) {
  if (!enabled()) return;
  nlohmann::json versioned = line;
  versioned[kFormatVersionKey] = kMetricsFormatVersion;
  metrics_ << versioned.dump() << '\n';
  metrics_.flush();
  if (!metrics_)
    throw InputError(fmt::format("{}/metrics.jsonl: write failed: {}", dir_, std::strerror(errno)));
  if (!tb_) return;
  log_scalars(line);
  tb_->flush();
}

void RunWriter::log_scalars(const nlohmann::json& line) {
  const auto step = line.find("step");
  if (step == line.end() || !step->is_number_integer()) return;
  tb_step_ = step->get<int64_t>();
  const std::string kind = line.value("kind", "epoch");
  for (const auto& [key, value] : line.items())
    if (key != "step" && key != kFormatVersionKey && value.is_number())
      tb_->scalar(kind + "/" + key, tb_step_, value.get<double>());
}

void RunWriter::write_summary(const nlohmann::json& summary) {
  if (!enabled()) return;
  nlohmann::json versioned = summary;
  versioned[kFormatVersionKey] = kSummaryFormatVersion;
  core::write_file_atomically((fs::path(dir_) / "summary.json").string(), versioned.dump(2) + "\n");
  if (tb_) tb_->flush();
}

}  // namespace loom::train
