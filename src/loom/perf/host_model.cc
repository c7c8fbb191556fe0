#include "loom/perf/host_model.h"

#include <algorithm>

namespace loom::perf {
namespace {

// The value at the largest key <= k, else the smallest key's.
template <class K>
double floor_lookup(const std::map<K, double>& m, const K& k) {
  if (m.empty()) return 0;
  auto it = m.upper_bound(k);
  if (it == m.begin()) return it->second;
  return std::prev(it)->second;
}

}  // namespace

double HostRates::gemm_rate(int workers, int threads) const {
  if (gemm_flops.empty()) return 0;
  if (auto it = gemm_flops.find({workers, threads}); it != gemm_flops.end()) return it->second;
  // Not measured: one worker with this many threads (or the nearest fewer), scaled down if
  // the cores are oversubscribed.
  std::map<int, double> one_worker;
  for (const auto& [k, v] : gemm_flops)
    if (k.first == 1) one_worker[k.second] = v;
  const double r =
      one_worker.empty() ? gemm_flops.begin()->second : floor_lookup(one_worker, threads);
  const int busy = workers * threads;
  return cores > 0 && busy > cores ? r * double(cores) / double(busy) : r;
}

double HostRates::share(const std::map<int, double>& aggregate, int workers, int threads) const {
  const int busy = std::max(1, workers * threads);
  const int usable = cores > 0 ? std::min(busy, cores) : busy;
  return floor_lookup(aggregate, usable) / double(std::max(1, workers));
}

double HostRates::link_share(const std::string& link, int ranks) const {
  const auto it = link_ranks.find(link);
  if (cores <= 0 || it == link_ranks.end() || it->second < 1 || ranks < 1) return 1.0;
  auto core_share = [this](int n) { return std::min(1.0, double(cores) / double(n)); };
  return core_share(ranks) / core_share(it->second);
}

}  // namespace loom::perf
