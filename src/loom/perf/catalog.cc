#include "loom/perf/catalog.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "loom/core/config_value.h"
#include "loom/core/error.h"
#include "loom/perf/gpu_roofline.h"
#include "loom/perf/toml_rows.h"

namespace loom::perf {
namespace {

template <typename Map>
std::vector<std::string> keys_of(const Map& m) {
  std::vector<std::string> out;
  for (auto& [k, v] : m) out.push_back(k);
  return out;
}

template <typename Map>
const typename Map::mapped_type& lookup(const Map& m, const std::string& what,
                                        const std::string& name) {
  auto it = m.find(name);
  if (it == m.end()) throw InputError(unknown_name_message(what, name, keys_of(m)));
  return it->second;
}

// One row of each kind, checked against the rows it names (a GPU's links, a cloud's GPU).
LinkSpec read_link(const RowReader& r) {
  r.check_known({"name", "kind", "gbs", "latency_us", "efficiency", "flow_gbs", "source"});
  LinkSpec l;
  l.name = r.str("name");
  l.kind = r.str("kind");
  l.gbs = r.num("gbs");
  l.latency_us = r.num("latency_us", true, true);
  l.efficiency = r.num("efficiency", false, false, 1.0);
  if (l.efficiency > 1) r.fail("efficiency", fmt::format("must be <= 1, got {}", l.efficiency));
  l.flow_gbs = r.num("flow_gbs", false, true, 0);
  l.source = r.str("source");
  return l;
}

GpuSpec read_gpu(const RowReader& r, const std::map<std::string, LinkSpec>& links) {
  r.check_known({"name",
                 "fp32_tflops",
                 "tensor_tflops",
                 "memory_gb",
                 "mem_bw_gbs",
                 "host_link",
                 "peer_link",
                 "tdp_w",
                 "price_usd",
                 "price_kind",
                 "chip",
                 "form_factor",
                 "slots",
                 "cooling",
                 "baseboard",
                 "vendor",
                 "cuda_cc",
                 "tf32_tflops",
                 "fp8_tflops",
                 "fp32_dual_issue",
                 "peaks_source",
                 "fp32_gemm_fraction",
                 "tensor_gemm_fraction",
                 "gemm_source",
                 "l2_mib",
                 "l2_source",
                 "source"});
  GpuSpec g;
  g.name = r.str("name");
  g.fp32_tflops = r.num("fp32_tflops");
  g.tensor_tflops = r.num("tensor_tflops", true, true);
  g.tf32_tflops = r.num("tf32_tflops", false, true, 0);
  g.fp8_tflops = r.num("fp8_tflops", false, true, 0);
  g.fp32_dual_issue = r.flag("fp32_dual_issue", false);
  g.peaks_source = r.str("peaks_source", false);
  g.fp32_gemm_fraction = r.num("fp32_gemm_fraction", false, false, kMedianFp32GemmFraction);
  g.tensor_gemm_fraction = r.num("tensor_gemm_fraction", false, false, kMedianTensorGemmFraction);
  // GeForce cards run above their rated boost clock: a measured GEMM may pass the figure a bit.
  if (g.fp32_gemm_fraction > 1.5)
    r.fail("fp32_gemm_fraction", "must be a share of the datasheet figure, at most 1.5");
  if (g.tensor_gemm_fraction > 1.5)
    r.fail("tensor_gemm_fraction", "must be a share of the datasheet figure, at most 1.5");
  g.gemm_source = r.str("gemm_source", false);
  g.memory_gb = r.num("memory_gb");
  g.mem_bw_gbs = r.num("mem_bw_gbs");
  g.l2_mib = r.num("l2_mib", false, true, 0);
  g.l2_source = r.str("l2_source", g.l2_mib > 0);
  g.host_link = r.str("host_link");
  g.peer_link = r.str("peer_link");
  g.tdp_w = r.num("tdp_w");
  g.price_usd = r.num("price_usd", false, false, 0);
  g.price_kind = r.str("price_kind", false, g.price_usd > 0 ? "msrp" : "");
  g.source = r.str("source");
  g.chip = r.str("chip", false);
  g.vendor = r.str("vendor", false, "nvidia");
  g.cuda_cc = r.num("cuda_cc", false, true);
  if (!links.count(g.host_link))
    r.fail("host_link", unknown_name_message("link", g.host_link, keys_of(links)));
  if (g.peer_link != "none" && !links.count(g.peer_link))
    r.fail("peer_link", unknown_name_message("link", g.peer_link, keys_of(links)));
  // Whether and where a GPU fits a machine: a card needs its width, a module its baseboard.
  g.form_factor = r.str("form_factor");
  if (g.form_factor == "pcie") {
    g.slots = r.num("slots");
    const std::string cooling = r.str("cooling", false, "active");
    if (cooling != "active" && cooling != "passive")
      r.fail("cooling", fmt::format("must be active or passive, got '{}'", cooling));
    g.passive = cooling == "passive";
  } else if (g.is_module()) {
    g.baseboard = r.str("baseboard");
  } else if (g.form_factor != "machine") {
    r.fail("form_factor",
           fmt::format("must be pcie, sxm, oam or machine, got '{}'", g.form_factor));
  }
  return g;
}

HostClassSpec read_host(const RowReader& r, const std::map<std::string, LinkSpec>& links) {
  r.check_known({"name",          "kind",        "description", "price_usd", "price_date",
                 "price_source",  "form_factor", "baseboard",   "gpus_min",  "gpus_max",
                 "slots",         "psu_w",       "host_w",      "idle_w",    "supply",
                 "pcie_link",     "cpu_lanes",   "topology",    "nics",      "nics_per_node",
                 "passive_cards", "source"});
  HostClassSpec h;
  h.name = r.str("name");
  h.kind = r.str("kind");
  if (h.kind != "desktop" && h.kind != "workstation" && h.kind != "server" && h.kind != "baseboard")
    r.fail("kind",
           fmt::format("must be desktop, workstation, server or baseboard, got '{}'", h.kind));
  h.description = r.str("description");
  h.price_usd = r.num("price_usd");
  h.price_date = r.str("price_date");
  h.price_source = r.str("price_source");
  h.form_factor = r.str("form_factor");
  if (h.form_factor == "pcie") {
    h.slots = r.num("slots");
    h.pcie_link = r.str("pcie_link");
    if (!links.count(h.pcie_link))
      r.fail("pcie_link", unknown_name_message("link", h.pcie_link, keys_of(links)));
    h.cpu_lanes = r.count("cpu_lanes", 0);
  } else if (h.form_factor == "sxm" || h.form_factor == "oam") {
    h.baseboard = r.str("baseboard");
  } else {
    r.fail("form_factor", fmt::format("must be pcie, sxm or oam, got '{}'", h.form_factor));
  }
  h.gpus_max = r.count("gpus_max", 0);
  if (h.gpus_max < 1) r.fail("gpus_max", "is missing");
  h.gpus_min = r.count("gpus_min", 1);
  if (h.gpus_min > h.gpus_max)
    r.fail("gpus_min", fmt::format("must be <= gpus_max ({}), got {}", h.gpus_max, h.gpus_min));
  h.psu_w = r.num("psu_w");
  h.host_w = r.num("host_w");
  h.idle_w = r.num("idle_w", false, true, 0);
  h.supply = r.str("supply");
  h.topology = r.str("topology");
  h.nics = r.strs("nics");
  for (const auto& l : h.nics)
    if (!links.count(l)) r.fail("nics", unknown_name_message("link", l, keys_of(links)));
  h.nics_per_node = r.count("nics_per_node", 1);
  h.passive_cards = r.flag("passive_cards", false);
  h.source = r.str("source");
  return h;
}

CloudSpec read_cloud(const RowReader& r, const std::map<std::string, GpuSpec>& gpus) {
  r.check_known({"name", "gpu", "gpus_max", "usd_per_gpu_hour", "date", "source"});
  CloudSpec c;
  c.name = r.str("name");
  c.gpu = r.str("gpu");
  if (!gpus.count(c.gpu)) r.fail("gpu", unknown_name_message("GPU", c.gpu, keys_of(gpus)));
  c.gpus_max = r.count("gpus_max", 1);
  c.usd_per_gpu_hour = r.num("usd_per_gpu_hour");
  c.date = r.str("date");
  c.source = r.str("source");
  return c;
}
}  // namespace

std::string unknown_name_message(const std::string& what, const std::string& name,
                                 const std::vector<std::string>& known, const std::string& hint) {
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& k : known) {
    size_t d = edit_distance(name, k);
    // A prefix or substring match is as good as a near spelling ("3090" -> "rtx-3090").
    if (k.find(name) != std::string::npos || name.find(k) != std::string::npos)
      d = std::min<size_t>(d, 1);
    scored.emplace_back(d, k);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> close;
  for (auto& [d, k] : scored) {
    if (close.size() == 4) break;
    if (d <= std::max<size_t>(3, name.size() / 2)) close.push_back(k);
  }
  if (close.empty()) return fmt::format("unknown {} '{}' ({})", what, name, hint);
  return fmt::format("unknown {} '{}'; close matches: {} ({})", what, name, fmt::join(close, ", "),
                     hint);
}

Catalog Catalog::builtin() {
  Catalog c;
  c.load_text(kBuiltinCatalogToml, "data/hardware/catalog.toml (built in)");
  return c;
}

void Catalog::load_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot open catalog file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  load_text(ss.str(), path);
}

void Catalog::load_text(const std::string& text, const std::string& name) {
  toml::table root = parse_toml_table(text, name);
  for (auto& [k, v] : root) {
    std::string key(k.str());
    if (key != "gpu" && key != "link" && key != "storage" && key != "host_memory" &&
        key != "rate" && key != "framework" && key != "host" && key != "cloud")
      throw InputError(
          fmt::format("{}: unknown section '{}'; expected [[gpu]], [[link]], [[storage]], "
                      "[[host_memory]], [[rate]], [[framework]], [[host]], [[cloud]]",
                      name, key));
  }
  // Links first: GPU rows name them.
  for_rows(root, name, "link", [&](const RowReader& r) {
    const LinkSpec l = read_link(r);
    links_[l.name] = l;
  });
  for_rows(root, name, "gpu", [&](const RowReader& r) {
    const GpuSpec g = read_gpu(r, links_);
    gpus_[g.name] = g;
  });
  for_rows(root, name, "host", [&](const RowReader& r) {
    const HostClassSpec h = read_host(r, links_);
    hosts_[h.name] = h;
  });
  for_rows(root, name, "cloud", [&](const RowReader& r) {
    const CloudSpec c = read_cloud(r, gpus_);
    clouds_[c.name] = c;
  });
  for_rows(root, name, "storage", [&](const RowReader& r) {
    r.check_known({"name", "read_mbs", "source"});
    StorageSpec s{r.str("name"), r.num("read_mbs"), r.str("source")};
    storages_[s.name] = s;
  });
  for_rows(root, name, "host_memory", [&](const RowReader& r) {
    r.check_known({"name", "gbs", "source"});
    HostMemorySpec h{r.str("name"), r.num("gbs"), r.str("source")};
    host_memories_[h.name] = h;
  });
  for_rows(root, name, "framework", [&](const RowReader& r) {
    r.check_known({"name", "step_overhead_ms", "source"});
    FrameworkSpec f{r.str("name"), r.num("step_overhead_ms", true, true), r.str("source")};
    frameworks_[f.name] = f;
  });
  for_rows(root, name, "rate", [&](const RowReader& r) {
    r.check_known({"gpu", "workload", "precision", "batch", "samples_per_s", "source",
                   "publication", "layout"});
    RateSpec rs;
    rs.gpu = r.str("gpu");
    rs.workload = r.str("workload");
    rs.precision = r.str("precision");
    if (rs.precision != "fp32" && rs.precision != "tf32" && rs.precision != "mixed" &&
        rs.precision != "fp8")
      r.fail("precision", fmt::format("must be fp32, tf32, mixed or fp8, got '{}'", rs.precision));
    rs.batch = r.num("batch");
    rs.samples_per_s = r.num("samples_per_s");
    rs.source = r.str("source");
    rs.publication = r.str("publication", false, rs.source.substr(0, rs.source.find(':')));
    rs.layout = r.str("layout", false, "nhwc");
    if (!is_layout(rs.layout))
      r.fail("layout", fmt::format("must be {}, got '{}'", kLayoutNames, rs.layout));
    if (!gpus_.count(rs.gpu)) r.fail("gpu", unknown_name_message("GPU", rs.gpu, keys_of(gpus_)));
    // A row for the same GPU, workload, precision and batch replaces the earlier one.
    auto same = [&](const RateSpec& o) {
      return o.gpu == rs.gpu && o.workload == rs.workload && o.precision == rs.precision &&
             o.batch == rs.batch;
    };
    rates_.erase(std::remove_if(rates_.begin(), rates_.end(), same), rates_.end());
    rates_.push_back(rs);
  });
}

double LinkSpec::flow_bytes_per_s(double flows, double ports) const {
  double share = bytes_per_s() * std::max(ports, 1.0) / std::max(flows, 1.0);
  if (flow_gbs > 0) share = std::min(share, flow_gbs * 1e9);
  return share;
}

const FrameworkSpec& Catalog::framework(const std::string& name) const {
  static const FrameworkSpec none{"none", 0, "no framework overhead"};
  if (name == "none") return none;
  return lookup(frameworks_, "framework", name);
}

const RateSpec* Catalog::rate(const std::string& gpu, const std::string& workload,
                              const std::string& precision, double batch) const {
  const RateSpec* best = nullptr;
  for (const auto& r : rates_) {
    if (r.gpu != gpu || r.workload != workload || r.precision != precision) continue;
    if (!best || std::abs(std::log(r.batch / batch)) < std::abs(std::log(best->batch / batch)))
      best = &r;
  }
  return best;
}

const GpuSpec& Catalog::gpu(const std::string& name) const {
  return lookup(gpus_, "GPU", name);
}
const HostClassSpec& Catalog::host(const std::string& name) const {
  return lookup(hosts_, "host class", name);
}
const LinkSpec& Catalog::link(const std::string& name) const {
  return lookup(links_, "link", name);
}
const StorageSpec& Catalog::storage(const std::string& name) const {
  return lookup(storages_, "storage", name);
}
const HostMemorySpec& Catalog::host_memory(const std::string& name) const {
  return lookup(host_memories_, "host memory", name);
}

const LinkSpec& Catalog::intra_link_of(const GpuSpec& gpu) const {
  return link(gpu.peer_link != "none" ? gpu.peer_link : gpu.host_link);
}

std::string loom_precision(const GpuSpec& g, const std::string& requested) {
  if (requested != "mixed" || g.form_factor == "machine") return "fp32";
  if (g.cuda_cc >= 8.0) return "bf16";  // the CUDA backend's bf16 products need sm_80
  if (g.cuda_cc >= 7.0) return "fp16";
  return "fp32";
}

}  // namespace loom::perf
