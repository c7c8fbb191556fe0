#include "loom/cli/trained_run.h"

#include <fmt/format.h>

#include <filesystem>

#include "loom/core/error.h"

namespace loom::cli {

std::string weights_path(const std::string& run, const std::string& checkpoint) {
  namespace fs = std::filesystem;
  if (checkpoint.empty()) return run;
  std::error_code ec;
  if (fs::exists(checkpoint, ec)) return checkpoint;
  const fs::path inside = fs::path(run) / "checkpoints" / checkpoint;
  if (fs::exists(inside, ec)) return inside.string();
  throw InputError(
      fmt::format("{}: no such checkpoint directory (nor {})", checkpoint, inside.string()));
}

}  // namespace loom::cli
