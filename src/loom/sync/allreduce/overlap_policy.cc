#include "loom/sync/allreduce/overlap_policy.h"

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

bool resolve_overlap(OverlapSetting s, int workers_on_host, int threads_per_worker, int host_cores,
                     bool device_transport) {
  if (s != OverlapSetting::kAuto) return s == OverlapSetting::kOn;
  return default_overlap(workers_on_host, threads_per_worker, host_cores, device_transport);
}

bool push_during_backward(OverlapSetting s) {
  return s != OverlapSetting::kOff;
}

bool inline_combine(OverlapSetting s, bool overlap) {
  if (s != OverlapSetting::kAuto) return s == OverlapSetting::kInline;
  return !overlap;
}

bool resolve_overlap(OverlapSetting s, int threads_per_worker, const comm::Communicator& comm) {
  int on_host = comm.size();
  if (!comm.in_one_process()) {
    const int local = comm::detect_launcher().local_size;
    if (local > 0) on_host = local;
  }
  return resolve_overlap(s, on_host, threads_per_worker, int(std::thread::hardware_concurrency()),
                         comm.device_memory());
}

}  // namespace loom::sync
