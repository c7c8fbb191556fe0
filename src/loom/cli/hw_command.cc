// `loom hw list`: the hardware catalog the performance model uses (perf/catalog.h).
#include <fmt/format.h>

#include "loom/cli/commands.h"
#include "loom/cli/perf_options.h"

namespace loom::cli::hw_command {
namespace {

void setup(CLI::App& app) {
  auto catalog = std::make_shared<CatalogOptions>();
  auto sources = std::make_shared<bool>(false);
  CLI::App* cmd =
      app.add_subcommand("list",
                         "show the hardware catalog (GPUs, links, storage, host memory, published "
                         "rates, frameworks, host classes, cloud prices)");
  add_catalog_options(*cmd, *catalog, /*with_calibration=*/false);
  cmd->add_flag("--sources", *sources,
                "show each row's source keys (see shared/reference/hardware.md)");
  cmd->callback([catalog, sources] {
    const perf::Catalog cat = catalog->load();
    fmt::print(
        "GPUs (TFLOPS dense; tf32, tensor = FP16/BF16 and fp8 on tensor cores with FP32 "
        "accumulate, - = none; fp32* counts a datapath shared with INT32; GB/s per direction)\n");
    fmt::print("{:<16} {:>7} {:>7} {:>7} {:>7} {:>6} {:>7} {:<7} {:<15} {:>6} {:<14} {:>8}{}\n",
               "name", "fp32", "tf32", "tensor", "fp8", "mem GB", "mem GB/s", "host", "peer link",
               "TDP W", "form", "price $", *sources ? "  source; peaks" : "");
    auto peak = [](double t) { return t > 0 ? fmt::format("{:.1f}", t) : std::string("-"); };
    for (const auto& [n, g] : cat.gpus())
      fmt::print(
          "{:<16} {:>7} {:>7} {:>7} {:>7} {:>6.0f} {:>8.0f} {:<7} {:<15} {:>6.0f} {:<14} {:>8}{}\n",
          n, fmt::format("{:.1f}{}", g.fp32_tflops, g.fp32_dual_issue ? "*" : ""),
          peak(g.tf32_tflops), peak(g.tensor_tflops), peak(g.fp8_tflops), g.memory_gb, g.mem_bw_gbs,
          g.host_link, g.peer_link, g.tdp_w,
          g.form_factor == "pcie" ? fmt::format("pcie {:g}-slot{}", g.slots, g.passive ? "*" : "")
                                  : fmt::format("{} {}", g.form_factor, g.baseboard),
          g.has_price() ? fmt::format("{:.0f}{}", g.price_usd, g.price_kind == "est" ? "~" : "")
                        : "-",
          *sources ? "  " + g.source + "; " + g.peaks_source : "");
    fmt::print(
        "(price: MSRP; ~ = press/street estimate; - = unknown. form: * = passively cooled, it "
        "needs a server's airflow)\n\nLinks\n");
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
    fmt::print("\nHost classes (price without GPUs; the advisor loads PSUs to 90%)\n");
    fmt::print("{:<14} {:<12} {:>8} {:<11} {:>5} {:>6} {:>7} {:>7}  {}\n", "name", "kind",
               "price $", "date", "GPUs", "slots", "PSU W", "host W", "carries");
    for (const auto& [n, h] : cat.hosts())
      fmt::print("{:<14} {:<12} {:>8.0f} {:<11} {:>5} {:>6} {:>7.0f} {:>7.0f}  {}{}\n", n, h.kind,
                 h.price_usd, h.price_date,
                 h.gpus_min == h.gpus_max ? fmt::format("{}", h.gpus_max)
                                          : fmt::format("{}-{}", h.gpus_min, h.gpus_max),
                 h.form_factor == "pcie" ? fmt::format("{:g}", h.slots) : std::string("-"), h.psu_w,
                 h.host_w,
                 h.form_factor == "pcie"
                     ? fmt::format("PCIe cards ({})", h.pcie_link)
                     : fmt::format("{} modules on {}", h.form_factor, h.baseboard),
                 *sources ? "\n    " + h.price_source + "; " + h.source : "");
    fmt::print("\nCloud (on demand)\n");
    for (const auto& [n, c] : cat.clouds())
      fmt::print("{:<20} {:<16} {:>2} GPUs {:>6.2f} $/GPU-h  {}{}\n", n, c.gpu, c.gpus_max,
                 c.usd_per_gpu_hour, c.date, *sources ? "  " + c.source : "");
  });
}

CommandRegistrar reg("hw list", setup);

}  // namespace
}  // namespace loom::cli::hw_command
