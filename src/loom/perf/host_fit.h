// Which machines carry n GPUs of a kind: the catalog's host classes ([[host]]) checked for
// form factor (a PCIe card in slots, an SXM/OAM module only on its own baseboard), count,
// slot width and power, and the GPU-to-GPU link their topology gives the performance model.
//   cooling a passively cooled card (no fans of its own) only where the class cools such cards
//   slots   n x the card's width (whole slots) <= the class's slot widths for GPUs
//   power   n x TDP + the host's own load <= 90% of the PSUs' usable output: Lambda keeps a
//           1600 W workstation under 1440 W (lambda-30xx, docs/perf.md)
//   link    an SXM/OAM baseboard: the GPU's peer link (NVSwitch, xGMI); a PCIe card with a
//           bridge: the bridge for a pair, PCIe beyond (a bridge joins two cards); else PCIe at
//           the slower of the card's and the slot's generation, at the lanes the CPU leaves
//           each card (x16 while they last, then x8, ...)
#pragma once

#include <string>
#include <vector>

#include "loom/perf/catalog.h"

namespace loom::perf {

// The share of its PSUs' rating a machine may draw.
inline constexpr double kPsuLoad = 0.9;

struct HostFit {
  const HostClassSpec* host = nullptr;
  int gpus = 0;
  bool fits = false;
  std::string why_not;  // when it does not fit: "12 slots of cards, 8 slots"
  double slots_used = 0;
  double gpu_w = 0;    // the GPUs' TDP together
  double draw_w = 0;   // GPUs and host at load
  double limit_w = 0;  // kPsuLoad x psu_w
  int lanes = 16;      // per card (PCIe)
  LinkSpec intra;      // GPU to GPU inside the machine
  std::string why;     // slots, watts, topology and link, in words
};

// Whether `host` carries `n` of `gpu`, and how.
HostFit fit_host(const Catalog& cat, const HostClassSpec& host, const GpuSpec& gpu, int n);

// The most GPUs of a kind, a power of two up to `cap`, that `host` carries (0: none).
int max_gpus_in(const Catalog& cat, const HostClassSpec& host, const GpuSpec& gpu, int cap);

// What feeds a machine drawing `watts` at load, as a buyer plans it: the smallest common
// circuit that carries it continuously (80% of the breaker: NEC's continuous-load rule, as
// lambda-30xx applies it to a 120 V 15 A circuit), or how many 240 V 30 A circuits.
std::string circuit_for(double watts);

// Heat to remove, BTU/h (1 W = 3.412 BTU/h).
inline double btu_per_hour(double watts) {
  return watts * 3.412;
}

}  // namespace loom::perf
