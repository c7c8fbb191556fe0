// The input pipeline's figures (docs/data.md) in one run; the same as `loom bench loader`.
//   build/loader_bench [--quick] [--mem-cap-mb N] [--throttle-mbps R] [--work-dir DIR]
//                      [--stall-batch B] [--consume-share S] [--data-dir DIR]
#include "loom/measure/loader_bench.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "loom/core/error.h"

int main(int argc, char** argv) {
  loom::measure::LoaderBenchOptions o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "loader_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--quick")
      o.quick = true;
    else if (a == "--mem-cap-mb")
      o.mem_cap_mb = std::stod(value());
    else if (a == "--throttle-mbps")
      o.throttle_mbps = std::stod(value());
    else if (a == "--work-dir")
      o.work_dir = value();
    else if (a == "--data-dir")
      o.fashion_dir = value();
    else {
      std::fprintf(stderr, "loader_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  try {
    loom::measure::BenchOutput out;
    loom::measure::run_loader_bench(o, out);
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "loader_bench: %s\n", e.what());
    return int(e.code());
  }
  return 0;
}
