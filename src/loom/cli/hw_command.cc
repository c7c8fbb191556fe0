// `loom hw list`: the hardware catalog the performance model uses (perf/catalog.h).
#include <fmt/format.h>

#include "loom/cli/commands.h"
#include "loom/cli/perf_options.h"

namespace loom::cli {
namespace {

void setup(CLI::App& app) {
  auto catalog = std::make_shared<CatalogOptions>();
  auto sources = std::make_shared<bool>(false);
  CLI::App* cmd =
      app.add_subcommand("list",
                         "show the hardware catalog (GPUs, links, storage, host memory, published "
                         "rates, frameworks)");
  add_catalog_options(*cmd, *catalog, /*with_calibration=*/false);
  cmd->add_flag("--sources", *sources,
                "show each row's source keys (see shared/reference/hardware.md)");
  cmd->callback([catalog, sources] {
    const perf::Catalog cat = catalog->load();
    fmt::print(
        "GPUs (TFLOPS dense; tensor = FP16/BF16 with FP32 accumulate; GB/s per direction)\n");
    fmt::print("{:<16} {:>7} {:>7} {:>6} {:>7} {:<7} {:<15} {:>6} {:>8}{}\n", "name", "fp32",
               "tensor", "mem GB", "mem GB/s", "host", "peer link", "TDP W", "price $",
               *sources ? "  source" : "");
    for (const auto& [n, g] : cat.gpus())
      fmt::print("{:<16} {:>7.1f} {:>7.1f} {:>6.0f} {:>8.0f} {:<7} {:<15} {:>6.0f} {:>8}{}\n", n,
                 g.fp32_tflops, g.tensor_tflops, g.memory_gb, g.mem_bw_gbs, g.host_link,
                 g.peer_link, g.tdp_w,
                 g.has_price()
                     ? fmt::format("{:.0f}{}", g.price_usd, g.price_kind == "est" ? "~" : "")
                     : "-",
                 *sources ? "  " + g.source : "");
    fmt::print("(price: MSRP; ~ = press/street estimate; - = unknown)\n\nLinks\n");
    fmt::print("{:<16} {:<11} {:>8} {:>10} {:>6}{}\n", "name", "kind", "GB/s", "alpha us", "eff",
               *sources ? "  source" : "");
    for (const auto& [n, l] : cat.links())
      fmt::print("{:<16} {:<11} {:>8.2f} {:>10.2f} {:>6.2f}{}\n", n, l.kind, l.gbs, l.latency_us,
                 l.efficiency, *sources ? "  " + l.source : "");
    fmt::print("\nStorage (sequential read)\n");
    for (const auto& [n, s] : cat.storages())
      fmt::print("{:<16} {:>8.0f} MB/s{}\n", n, s.read_mbs, *sources ? "  " + s.source : "");
    fmt::print("\nHost memory\n");
    for (const auto& [n, h] : cat.host_memories())
      fmt::print("{:<16} {:>8.1f} GB/s{}\n", n, h.gbs, *sources ? "  " + h.source : "");
    fmt::print("\nPublished training rates (one device, whole steps)\n");
    fmt::print("{:<16} {:<16} {:<9} {:>6} {:>10}{}\n", "gpu", "workload", "precision", "batch",
               "samples/s", *sources ? "  source" : "");
    for (const auto& r : cat.rates())
      fmt::print("{:<16} {:<16} {:<9} {:>6.0f} {:>10.1f}{}\n", r.gpu, r.workload, r.precision,
                 r.batch, r.samples_per_s, *sources ? "  " + r.source : "");
    fmt::print("\nFrameworks (per-step overhead)\n");
    for (const auto& [n, f] : cat.frameworks())
      fmt::print("{:<16} {:>8.1f} ms{}\n", n, f.step_overhead_ms, *sources ? "  " + f.source : "");
  });
}

CommandRegistrar reg("hw list", setup);

}  // namespace
}  // namespace loom::cli
