// The hardware catalog: GPUs, links, storage, host memory, the machines GPUs are bought in
// (host classes) and cloud prices, read from TOML files
// (data/hardware/catalog.toml is built in; users add their own with `--catalog FILE`).
// Every row keeps the key of its source; every numeric field is checked on load, and a bad
// row is reported with the file, the entry and the field (loom::InputError).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace loom::perf {

struct LinkSpec {
  std::string name;
  std::string kind;         // pcie, nvlink, xgmi, infiniband, ethernet
  double gbs = 0;           // data rate per direction, GB/s (1e9 B/s)
  double latency_us = 0;    // per-message alpha
  double efficiency = 1.0;  // achievable fraction of gbs in collectives (calibration sets it)
  std::string source;
  // What one connection carries at most, GB/s (0: no limit below gbs). Kernel TCP moves one
  // stream through one core: a 40 GbE port gave one iperf stream 4.1 Gbit/s (DeepSpeed's
  // 1-bit Adam blog), while several ranks' streams together fill more of the port.
  double flow_gbs = 0;
  double bytes_per_s() const { return gbs * 1e9 * efficiency; }
  double alpha_s() const { return latency_us * 1e-6; }
  // One connection's rate when `flows` connections share `ports` such links.
  double flow_bytes_per_s(double flows, double ports = 1) const;
};

// The medians of the catalog's measured GEMM fractions (data/hardware/catalog.toml), for a GPU
// without a published one.
inline constexpr double kMedianFp32GemmFraction = 0.77;
inline constexpr double kMedianTensorGemmFraction = 0.79;

struct GpuSpec {
  std::string name;
  double fp32_tflops = 0;
  double tensor_tflops = 0;  // FP16/BF16 tensor core, FP32 accumulate; 0 = none
  double tf32_tflops = 0;    // TF32 tensor core; 0 = none
  double fp8_tflops = 0;     // FP8 tensor core, FP32 accumulate; 0 = none
  // The FP32 figure counts a second datapath per SM partition that FP32 shares with INT32
  // (GA10x, AD10x, GB20x): convolutions issue from one of them (compute_model.h).
  bool fp32_dual_issue = false;
  std::string peaks_source;  // where the per-precision peaks come from
  // The share of the FP32 and of the tensor-core (FP16/BF16) figure that a large cuBLAS GEMM
  // measures on this GPU: its attainable peaks (the catalog's medians where none is published).
  double fp32_gemm_fraction = kMedianFp32GemmFraction;
  double tensor_gemm_fraction = kMedianTensorGemmFraction;
  std::string gemm_source;
  double memory_gb = 0;
  double mem_bw_gbs = 0;
  // The L2 cache in MiB (the whitepapers' KB are 1,024 bytes; 0: not known, nothing is counted
  // held in it) and where the figure comes from (gpu_roofline.h, "L2 cache").
  double l2_mib = 0;
  std::string l2_source;
  std::string host_link;  // a LinkSpec name
  std::string peer_link;  // a LinkSpec name or "none"
  double tdp_w = 0;
  double price_usd = 0;  // 0 = unknown
  std::string price_kind;
  std::string source;
  // The chip (GP100, GV100, ...): a published rate of one card carries over to another card
  // of the same chip in proportion to their peak FLOP/s (compute_model.h).
  std::string chip;
  // How the GPU mounts: "pcie" (a card in a PCIe slot), "sxm" or "oam" (a module on its
  // vendor's baseboard, `baseboard`), or "machine" (a whole measured machine, calibration.h).
  std::string form_factor;
  // "nvidia", or another vendor's GPU, which loom's GPU backend (CUDA) does not run.
  std::string vendor = "nvidia";
  // NVIDIA's compute capability (8.0 for the A100; 0: not known). Which precisions loom runs
  // on the GPU follows from it (loom_precision below).
  double cuda_cc = 0;
  double slots = 0;       // a PCIe card's width in expansion slots (the reference design's)
  bool passive = false;   // a heat sink without fans: it needs a server's airflow
  std::string baseboard;  // sxm / oam: the baseboard family it mounts on ("hgx-h100")
  bool has_price() const { return price_usd > 0; }
  bool is_module() const { return form_factor == "sxm" || form_factor == "oam"; }
  // loom runs on it: a CUDA GPU, or a measured machine (its CPU cores).
  bool loom_runs() const { return vendor == "nvidia" || form_factor == "machine"; }
  // Before Volta (compute capability 7.0) INT32 instructions issue on the FP32 cores; from
  // Volta on they have cores of their own (gpu_roofline.h cites the whitepaper).
  bool fp32_shares_int32() const { return cuda_cc > 0 && cuda_cc < 7.0; }
  // Volta's tensor cores (compute capability 7.0 and 7.2), the first generation.
  bool first_tensor_generation() const { return cuda_cc >= 7.0 && cuda_cc < 7.5; }
};

// The `precision` loom trains in on `g` when a user asks for mixed precision (`requested` =
// "mixed"): "bf16" on compute capability 8.0 and later (bf16 tensor cores), "fp16" with dynamic
// loss scaling on 7.x (fp16 tensor cores only), and "fp32" on older GPUs, which have no tensor
// cores to gain from, on a GPU whose capability is not known, and on a measured machine (its
// measured rates are fp32). `requested` =
// "fp32" gives "fp32".
std::string loom_precision(const GpuSpec& g, const std::string& requested);

// A kind of machine GPUs are bought in: a desktop, a workstation, a GPU server, an HGX/OAM
// baseboard system. `price_usd` is the machine without its GPUs; where the source prices a
// whole system, the catalog's GPU price x count was taken off and the row says so.
struct HostClassSpec {
  std::string name;
  std::string kind;  // desktop, workstation, server, baseboard
  std::string description;
  double price_usd = 0;
  std::string price_date;  // when the source's price was published
  std::string price_source;
  // GPUs it carries: "pcie" cards, or modules of one `baseboard` family.
  std::string form_factor = "pcie";
  std::string baseboard;
  int gpus_min = 1, gpus_max = 1;
  double slots = 0;  // expansion-slot widths available to GPU cards (pcie)
  // Power: the PSUs' usable output (with the vendor's redundancy), and what the host draws
  // besides its GPUs at load (CPUs, memory, drives, fans, NICs); idle 0 = not published.
  double psu_w = 0, host_w = 0, idle_w = 0;
  std::string supply;  // what feeds it ("one 120 V outlet", "4 x 200-240 V inputs")
  // PCIe: the link each card's slot runs at and the CPU lanes the GPU slots share (cards get
  // x16 while lanes last, then x8, ...); 0 lanes = every slot x16.
  std::string pcie_link;
  int cpu_lanes = 0;
  std::string topology;           // in words: which GPUs share what
  std::vector<std::string> nics;  // links it can take to other machines
  int nics_per_node = 1;
  bool passive_cards = false;  // its airflow cools passively cooled cards
  std::string source;
};

// Renting instead: GPUs of one kind by the hour, as a cloud lists them.
struct CloudSpec {
  std::string name;
  std::string gpu;
  int gpus_max = 1;  // GPUs in the largest instance
  double usd_per_gpu_hour = 0;
  std::string date;
  std::string source;
};

// A published single-device training rate: whole steps (forward, backward, update) of
// `workload` at `batch` samples in `precision` (fp32; tf32; mixed: 16-bit tensor math; fp8:
// MathPlan::rate_class).
struct RateSpec {
  std::string gpu, workload, precision;
  double batch = 0;
  double samples_per_s = 0;
  std::string source;
  // The publication the figure comes from (default: `source` up to its first ':'); a
  // validation case of the same publication never takes its compute from this row.
  std::string publication;
  // The run's memory format (gpu_roofline.h): nhwc (channels-last) or nchw.
  std::string layout = "nhwc";
};

// What a training framework adds to each data-parallel step beyond compute and the link:
// coordination of which gradients are ready (Horovod's cycle), per step.
struct FrameworkSpec {
  std::string name;
  double step_overhead_ms = 0;
  std::string source;
};

struct StorageSpec {
  std::string name;
  double read_mbs = 0;
  std::string source;
};

struct HostMemorySpec {
  std::string name;
  double gbs = 0;
  std::string source;
};

class Catalog {
 public:
  // The catalog compiled into loom (data/hardware/catalog.toml at build time).
  static Catalog builtin();
  // Adds or replaces rows from a TOML file / text; `name` is used in error messages.
  void load_file(const std::string& path);
  void load_text(const std::string& text, const std::string& name);

  // Throw InputError "unknown GPU 'x'; close matches: a, b, c" on a miss.
  const GpuSpec& gpu(const std::string& name) const;
  const LinkSpec& link(const std::string& name) const;
  const StorageSpec& storage(const std::string& name) const;
  const HostMemorySpec& host_memory(const std::string& name) const;
  // "none" is a framework with no overhead.
  const FrameworkSpec& framework(const std::string& name) const;
  bool has_link(const std::string& name) const { return links_.count(name) != 0; }
  // The published rate of `gpu` on `workload` in `precision` whose batch is closest to
  // `batch` (nullptr: none).
  const RateSpec* rate(const std::string& gpu, const std::string& workload,
                       const std::string& precision, double batch) const;
  const std::vector<RateSpec>& rates() const { return rates_; }

  const std::map<std::string, GpuSpec>& gpus() const { return gpus_; }
  const std::map<std::string, LinkSpec>& links() const { return links_; }
  const std::map<std::string, StorageSpec>& storages() const { return storages_; }
  const std::map<std::string, HostMemorySpec>& host_memories() const { return host_memories_; }
  const std::map<std::string, FrameworkSpec>& frameworks() const { return frameworks_; }
  const std::map<std::string, HostClassSpec>& hosts() const { return hosts_; }
  const std::map<std::string, CloudSpec>& clouds() const { return clouds_; }
  const HostClassSpec& host(const std::string& name) const;

  // A GPU's peer link if it has one, else its host link (GPUs talk through PCIe).
  const LinkSpec& intra_link_of(const GpuSpec& gpu) const;

 private:
  std::map<std::string, GpuSpec> gpus_;
  std::map<std::string, LinkSpec> links_;
  std::map<std::string, StorageSpec> storages_;
  std::map<std::string, HostMemorySpec> host_memories_;
  std::map<std::string, FrameworkSpec> frameworks_;
  std::map<std::string, HostClassSpec> hosts_;
  std::map<std::string, CloudSpec> clouds_;
  std::vector<RateSpec> rates_;
};

// "unknown <what> 'name'; close matches: a, b, c (see `loom hw list`)".
std::string unknown_name_message(const std::string& what, const std::string& name,
                                 const std::vector<std::string>& known,
                                 const std::string& hint = "see `loom hw list`");

// The built-in catalog's text (generated from data/hardware/catalog.toml by cmake/perf.cmake).
extern const char* const kBuiltinCatalogToml;

}  // namespace loom::perf
