// The hardware catalog: GPUs, links, storage and host memory, read from TOML files
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
  double bytes_per_s() const { return gbs * 1e9 * efficiency; }
  double alpha_s() const { return latency_us * 1e-6; }
};

struct GpuSpec {
  std::string name;
  double fp32_tflops = 0;
  double tensor_tflops = 0;  // FP16/BF16 tensor core, FP32 accumulate; 0 = none
  double memory_gb = 0;
  double mem_bw_gbs = 0;
  std::string host_link;  // a LinkSpec name
  std::string peer_link;  // a LinkSpec name or "none"
  double tdp_w = 0;
  double price_usd = 0;  // 0 = unknown
  std::string price_kind;
  std::string source;
  bool has_price() const { return price_usd > 0; }
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
  bool has_link(const std::string& name) const { return links_.count(name) != 0; }

  const std::map<std::string, GpuSpec>& gpus() const { return gpus_; }
  const std::map<std::string, LinkSpec>& links() const { return links_; }
  const std::map<std::string, StorageSpec>& storages() const { return storages_; }
  const std::map<std::string, HostMemorySpec>& host_memories() const { return host_memories_; }

  // A GPU's peer link if it has one, else its host link (GPUs talk through PCIe).
  const LinkSpec& intra_link_of(const GpuSpec& gpu) const;

 private:
  std::map<std::string, GpuSpec> gpus_;
  std::map<std::string, LinkSpec> links_;
  std::map<std::string, StorageSpec> storages_;
  std::map<std::string, HostMemorySpec> host_memories_;
};

// "unknown <what> 'name'; close matches: a, b, c (see `loom hw list`)".
std::string unknown_name_message(const std::string& what, const std::string& name,
                                 const std::vector<std::string>& known,
                                 const std::string& hint = "see `loom hw list`");

// The built-in catalog's text (generated from data/hardware/catalog.toml by cmake/perf.cmake).
extern const char* const kBuiltinCatalogToml;

}  // namespace loom::perf
