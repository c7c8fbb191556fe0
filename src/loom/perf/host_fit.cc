#include "loom/perf/host_fit.h"

#include <fmt/format.h>

#include <cmath>

namespace loom::perf {
namespace {

// The PCIe link a card gets in this machine: the slower generation of card and slot, at the
// lanes the CPU has for each of `n` cards.
LinkSpec pcie_path(const Catalog& cat, const HostClassSpec& host, const GpuSpec& gpu, int n,
                   int& lanes) {
  const LinkSpec& card = cat.link(gpu.host_link);
  const LinkSpec& slot = cat.link(host.pcie_link);
  LinkSpec l = card.gbs <= slot.gbs ? card : slot;
  lanes = 16;
  if (host.cpu_lanes > 0)
    while (lanes > 1 && lanes * n > host.cpu_lanes) lanes /= 2;
  l.gbs *= lanes / 16.0;
  l.name = fmt::format("{} x{}", l.name, lanes);
  return l;
}

}  // namespace

HostFit fit_host(const Catalog& cat, const HostClassSpec& host, const GpuSpec& gpu, int n) {
  HostFit f;
  f.host = &host;
  f.gpus = n;
  f.gpu_w = n * gpu.tdp_w;
  f.draw_w = f.gpu_w + host.host_w;
  f.limit_w = kPsuLoad * host.psu_w;
  f.intra = cat.link(gpu.host_link);
  if (gpu.is_module()) {
    if (host.form_factor != gpu.form_factor || host.baseboard != gpu.baseboard) {
      f.why_not = fmt::format("an {} module mounts only on its {} baseboard", gpu.form_factor,
                              gpu.baseboard);
      return f;
    }
  } else if (gpu.form_factor != "pcie") {
    f.why_not = fmt::format("a '{}' device goes in no host class", gpu.form_factor);
    return f;
  } else if (host.form_factor != "pcie") {
    f.why_not = fmt::format("a PCIe card does not mount on the {} baseboard", host.baseboard);
    return f;
  } else if (gpu.passive && !host.passive_cards) {
    f.why_not = "a passively cooled card needs a server's airflow";
    return f;
  }
  if (n < host.gpus_min || n > host.gpus_max) {
    f.why_not = host.gpus_min == host.gpus_max
                    ? fmt::format("it takes exactly {} GPUs", host.gpus_max)
                    : fmt::format("it holds {} to {} GPUs", host.gpus_min, host.gpus_max);
    return f;
  }
  if (!gpu.is_module()) {
    f.slots_used = n * std::ceil(gpu.slots);
    if (f.slots_used > host.slots) {
      f.why_not = fmt::format("{} x {:g}-slot cards need {:g} slots, it has {:g}", n, gpu.slots,
                              f.slots_used, host.slots);
      return f;
    }
  }
  if (f.draw_w > f.limit_w) {
    f.why_not = fmt::format(
        "{:.0f} W at load ({} x {:.0f} W + {:.0f} W host) over {:.0f} W ({:.0f}% "
        "of {:.0f} W of PSUs)",
        f.draw_w, n, gpu.tdp_w, host.host_w, f.limit_w, 100 * kPsuLoad, host.psu_w);
    return f;
  }
  f.fits = true;
  std::string link;
  if (gpu.is_module()) {
    f.intra = cat.intra_link_of(gpu);
    link = fmt::format("GPUs talk over {}", f.intra.name);
  } else if (gpu.peer_link != "none" && n == 2) {
    f.intra = cat.link(gpu.peer_link);
    link = fmt::format("the pair talks over its {} bridge", f.intra.name);
  } else {
    f.intra = pcie_path(cat, host, gpu, n, f.lanes);
    link = n == 1
               ? fmt::format("the card runs {} ({:.1f} GB/s each way)", f.intra.name, f.intra.gbs)
               : fmt::format("GPUs talk over PCIe, {:.1f} GB/s each way per card ({}){}",
                             f.intra.gbs, f.intra.name,
                             gpu.peer_link != "none" ? " (a bridge joins only two cards)" : "");
  }
  const std::string slots = gpu.is_module()
                                ? fmt::format("{} modules on its {} baseboard", n, host.baseboard)
                                : fmt::format("{} x {:g}-slot card{} in {:g} slots", n, gpu.slots,
                                              n == 1 ? "" : "s", host.slots);
  f.why = fmt::format("{}; {:.0f} W at load of {:.0f} W ({:.0f}% of {:.0f} W of PSUs); {}; {}",
                      slots, f.draw_w, f.limit_w, 100 * kPsuLoad, host.psu_w, host.topology, link);
  return f;
}

int max_gpus_in(const Catalog& cat, const HostClassSpec& host, const GpuSpec& gpu, int cap) {
  int best = 0;
  for (int n = 1; n <= cap; n *= 2)
    if (fit_host(cat, host, gpu, n).fits) best = n;
  return best;
}

std::string circuit_for(double watts) {
  struct Circuit {
    const char* name;
    double volts, amps;
  };
  static const Circuit circuits[] = {{"120 V 15 A", 120, 15},
                                     {"120 V 20 A", 120, 20},
                                     {"240 V 20 A", 240, 20},
                                     {"240 V 30 A", 240, 30}};
  for (const Circuit& c : circuits) {
    const double continuous = 0.8 * c.volts * c.amps;
    if (watts <= continuous)
      return fmt::format("one {} circuit ({:.0f} W continuous)", c.name, continuous);
  }
  const double per = 0.8 * 240 * 30;
  return fmt::format("{:.0f} x 240 V 30 A circuits ({:.0f} W continuous each)",
                     std::ceil(watts / per), per);
}

}  // namespace loom::perf
