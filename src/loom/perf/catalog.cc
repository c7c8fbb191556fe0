#include "loom/perf/catalog.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "loom/core/config.h"
#include "loom/core/error.h"

namespace loom::perf {
namespace {

// Reads the fields of one [[kind]] row, naming file, entry and field in every error.
class RowReader {
 public:
  RowReader(const toml::table& row, const std::string& file, const std::string& kind, size_t index)
      : row_(row), file_(file), kind_(kind) {
    entry_ = fmt::format("{} #{}", kind, index + 1);
    if (auto* n = row.get("name"); n && n->is_string())
      entry_ = fmt::format("{} '{}'", kind, **n->as_string());
    line_ = row.source().begin.line;
  }

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw InputError(
        fmt::format("{}: {} (line {}): field '{}' {}", file_, entry_, line_, field, problem));
  }

  std::string str(const std::string& field, bool required = true,
                  const std::string& def = "") const {
    const toml::node* n = row_.get(field);
    if (!n) {
      if (required) fail(field, "is missing");
      return def;
    }
    if (!n->is_string()) fail(field, "must be a string");
    std::string s = **n->as_string();
    if (required && s.empty()) fail(field, "must not be empty");
    return s;
  }

  // A number > 0 (or >= 0 when allow_zero); absent optional numbers give `def`.
  double num(const std::string& field, bool required = true, bool allow_zero = false,
             double def = 0) const {
    const toml::node* n = row_.get(field);
    if (!n) {
      if (required) fail(field, "is missing");
      return def;
    }
    double v = 0;
    if (n->is_integer()) {
      v = static_cast<double>(**n->as_integer());
    } else if (n->is_floating_point()) {
      v = **n->as_floating_point();
    } else {
      fail(field, "must be a number");
    }
    if (!std::isfinite(v)) fail(field, "must be finite");
    if (allow_zero ? v < 0 : v <= 0)
      fail(field, fmt::format("must be {} 0, got {}", allow_zero ? ">=" : ">", v));
    return v;
  }

  void check_known(const std::vector<std::string>& fields) const {
    for (auto& [k, v] : row_) {
      std::string key(k.str());
      if (std::find(fields.begin(), fields.end(), key) == fields.end())
        fail(key, fmt::format("is not a known field; known: {}", fmt::join(fields, ", ")));
    }
  }

 private:
  const toml::table& row_;
  std::string file_, kind_, entry_;
  uint32_t line_ = 0;
};

template <typename Fn>
void for_rows(const toml::table& root, const std::string& file, const std::string& kind, Fn fn) {
  const toml::node* n = root.get(kind);
  if (!n) return;
  const toml::array* arr = n->as_array();
  if (!arr)
    throw InputError(fmt::format("{}: '{}' must be an array of tables ([[{}]])", file, kind, kind));
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::table* t = (*arr)[i].as_table();
    if (!t) throw InputError(fmt::format("{}: {} #{} is not a table", file, kind, i + 1));
    fn(RowReader(*t, file, kind, i));
  }
}

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
  toml::table root;
  try {
    root = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    throw InputError(
        fmt::format("{}:{}: TOML syntax error: {}", name, e.source().begin.line, e.description()));
  }
  for (auto& [k, v] : root) {
    std::string key(k.str());
    if (key != "gpu" && key != "link" && key != "storage" && key != "host_memory")
      throw InputError(fmt::format(
          "{}: unknown section '{}'; expected [[gpu]], [[link]], [[storage]], [[host_memory]]",
          name, key));
  }
  // Links first: GPU rows name them.
  for_rows(root, name, "link", [&](const RowReader& r) {
    r.check_known({"name", "kind", "gbs", "latency_us", "efficiency", "source"});
    LinkSpec l;
    l.name = r.str("name");
    l.kind = r.str("kind");
    l.gbs = r.num("gbs");
    l.latency_us = r.num("latency_us", true, true);
    l.efficiency = r.num("efficiency", false, false, 1.0);
    if (l.efficiency > 1) r.fail("efficiency", fmt::format("must be <= 1, got {}", l.efficiency));
    l.source = r.str("source");
    links_[l.name] = l;
  });
  for_rows(root, name, "gpu", [&](const RowReader& r) {
    r.check_known({"name", "fp32_tflops", "tensor_tflops", "memory_gb", "mem_bw_gbs", "host_link",
                   "peer_link", "tdp_w", "price_usd", "price_kind", "source"});
    GpuSpec g;
    g.name = r.str("name");
    g.fp32_tflops = r.num("fp32_tflops");
    g.tensor_tflops = r.num("tensor_tflops", true, true);
    g.memory_gb = r.num("memory_gb");
    g.mem_bw_gbs = r.num("mem_bw_gbs");
    g.host_link = r.str("host_link");
    g.peer_link = r.str("peer_link");
    g.tdp_w = r.num("tdp_w");
    g.price_usd = r.num("price_usd", false, false, 0);
    g.price_kind = r.str("price_kind", false, g.price_usd > 0 ? "msrp" : "");
    g.source = r.str("source");
    if (!links_.count(g.host_link))
      r.fail("host_link", unknown_name_message("link", g.host_link, keys_of(links_)));
    if (g.peer_link != "none" && !links_.count(g.peer_link))
      r.fail("peer_link", unknown_name_message("link", g.peer_link, keys_of(links_)));
    gpus_[g.name] = g;
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
}

const GpuSpec& Catalog::gpu(const std::string& name) const {
  return lookup(gpus_, "GPU", name);
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

}  // namespace loom::perf
