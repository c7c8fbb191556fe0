// `loom advise --run CONFIG`: what codec/sync = "auto" would choose for this run on this
// machine, and why (train/auto_config.h), without training.
#pragma once

#include <string>
#include <vector>

namespace loom::cli {

struct AdviseRunArgs {
  std::string config;              // the run's config file
  std::vector<std::string> sets;   // KEY=VALUE overrides, as `loom train --set`
  std::string calibration;         // a `loom bench calibrate` file ("" = measure now)
  std::string mismatch = "error";  // a file from another machine: error | measure
};

// Prints the decision; codec, sync and sync.bucket_kib left unset count as "auto" (set ones
// limit the candidates as they would in the run). Errors are loom errors (exit 2).
void advise_run(const AdviseRunArgs& a);

}  // namespace loom::cli
