#include "loom/sync/ps/ps_layout.h"

#include <algorithm>

#include "loom/comm/communicator.h"
#include "loom/core/error.h"

namespace loom::sync {

PsLayout plan_ps_layout(int64_t num_params, const std::vector<Bucket>& buckets, int servers) {
  if (servers < 1) throw ConfigError(fmt::format("ps.servers = {} must be >= 1", servers));
  if (int64_t(servers) > num_params)
    throw ConfigError(
        fmt::format("ps.servers = {} is more than the model's {} parameters: "
                    "every server needs a non-empty key range",
                    servers, num_params));
  PsLayout l;
  l.num_params = num_params;
  for (int s = 0; s < servers; ++s) {
    const comm::BlockRange r = comm::block_range(size_t(num_params), servers, s);
    l.shards.push_back({int64_t(r.begin), int64_t(r.end)});
  }
  l.by_server.resize(size_t(servers));
  for (const Bucket& b : buckets) {
    std::vector<PsPiece> pieces;
    for (int s = 0; s < servers; ++s) {
      const int64_t lo = std::max(b.offset, l.shards[size_t(s)].begin);
      const int64_t hi = std::min(b.offset + b.count, l.shards[size_t(s)].end);
      if (lo >= hi) continue;
      PsPiece p{s, int(l.by_server[size_t(s)].size()), lo, hi - lo};
      pieces.push_back(p);
      l.by_server[size_t(s)].push_back(p);
    }
    l.by_bucket.push_back(std::move(pieces));
  }
  return l;
}

}  // namespace loom::sync
