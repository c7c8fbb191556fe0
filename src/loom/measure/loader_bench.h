// The input-pipeline benchmark behind `loom bench loader` and bench/loader_bench: the loader's
// figures (docs/data.md) in one run, printed as a table and as JSON lines.
#pragma once

#include <string>

#include "loom/data/sources/dataset.h"
#include "loom/measure/bench_harness.h"

namespace loom::measure {

struct LoaderBenchOptions {
  std::string fashion_dir = data::kDefaultFashionMnistDir;
  std::string work_dir = "/tmp";  // temporary shards go here (removed afterwards)
  double throttle_mbps = 120;     // a hard disk
  double mem_cap_mb = 64;         // the synthetic set is 4x this
  int64_t stall_batch = 512;      // global batch of the stall figure
  double consume_share = 0.5;     // the stand-in model consumes this share of the disk's rate
  bool quick = false;             // smaller sets, fewer steps
};

void run_loader_bench(const LoaderBenchOptions& opts, BenchOutput& out);

}  // namespace loom::measure
