#include "loom/sync/allreduce/overlap_policy.h"

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <variant>

#include "loom/comm/launcher_env.h"
#include "loom/core/error.h"

namespace loom::sync {

namespace {
// What sync.overlap says: nothing (unset: auto), "true", "false" or "inline".
std::optional<std::string> overlap_setting(const Config& cfg) {
  if (!cfg.has("sync.overlap")) return std::nullopt;
  const ConfigValue& v = cfg.values().at("sync.overlap");
  if (!v.is_array && std::holds_alternative<std::string>(v.value)) {
    const std::string s = std::get<std::string>(v.value);
    if (s != "inline")
      throw ConfigError(fmt::format(
          "{}: key 'sync.overlap': expected true, false or \"inline\", got \"{}\"", v.where, s));
    return s;
  }
  return cfg.get_bool("sync.overlap", true) ? "true" : "false";  // ConfigError if not a bool
}
}  // namespace

bool default_overlap(int workers_on_host, int threads_per_worker, int host_cores,
                     bool device_transport) {
  if (device_transport) return true;
  if (host_cores <= 0) return true;  // unknown: keep the overlapped path
  return int64_t(workers_on_host) * (int64_t(threads_per_worker) + 1) <= int64_t(host_cores);
}

bool overlap_from_config(const Config& cfg, int workers_on_host, int host_cores,
                         bool device_transport) {
  if (const auto s = overlap_setting(cfg)) return *s == "true";
  return default_overlap(workers_on_host, int(cfg.get_int("threads", 1, 1, 256)), host_cores,
                         device_transport);
}

bool push_during_backward_from_config(const Config& cfg) {
  const auto s = overlap_setting(cfg);
  return !s || *s != "false";
}

bool inline_combine_from_config(const Config& cfg, bool overlap) {
  if (const auto s = overlap_setting(cfg)) return *s == "inline";
  return !overlap;
}

bool overlap_from_config(const Config& cfg, const comm::Communicator& comm) {
  int on_host = comm.size();
  if (!comm.in_one_process()) {
    const int local = comm::detect_launcher().local_size;
    if (local > 0) on_host = local;
  }
  return overlap_from_config(cfg, on_host, int(std::thread::hardware_concurrency()),
                             comm.device_memory());
}

}  // namespace loom::sync
