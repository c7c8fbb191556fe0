#include "loom/sync/overlap_policy.h"

#include <cstdint>
#include <thread>

#include "loom/comm/launcher_env.h"

namespace loom::sync {

bool default_overlap(int workers_on_host, int threads_per_worker, int host_cores,
                     bool device_transport) {
  if (device_transport) return true;
  if (host_cores <= 0) return true;  // unknown: keep the overlapped path
  return int64_t(workers_on_host) * (int64_t(threads_per_worker) + 1) <= int64_t(host_cores);
}

bool overlap_from_config(const Config& cfg, int workers_on_host, int host_cores,
                         bool device_transport) {
  if (cfg.has("sync.overlap")) return cfg.get_bool("sync.overlap", true);
  return default_overlap(workers_on_host, int(cfg.get_int("threads", 1, 1, 256)), host_cores,
                         device_transport);
}

bool overlap_from_config(const Config& cfg, const comm::Communicator& comm) {
  int on_host = comm.size();
  if (comm.name() != "thread") {
    const int local = comm::detect_launcher().local_size;
    if (local > 0) on_host = local;
  }
  return overlap_from_config(cfg, on_host, int(std::thread::hardware_concurrency()),
                             comm.device_backend() != nullptr);
}

}  // namespace loom::sync
