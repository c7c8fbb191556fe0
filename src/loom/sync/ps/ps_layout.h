// How the parameter server cuts the flat parameter buffer. Server s owns the contiguous key
// range comm::block_range(num_params, S, s) (Li et al., OSDI 2014, partition keys into ranges
// so that a push or pull is a few contiguous spans, not a list of keys). Every gradient bucket
// is cut at shard boundaries into pieces; a piece is what travels in one push or one pull, and
// a server handles its pieces in bucket order, which is the order backward produces them.
#pragma once

#include <cstdint>
#include <vector>

#include "loom/sync/allreduce/buckets.h"

namespace loom::sync {

struct PsPiece {
  int server = 0;
  int index = 0;       // position among its server's pieces (its message tag)
  int64_t offset = 0;  // into the flat buffer
  int64_t count = 0;
};

struct PsShard {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

struct PsLayout {
  int64_t num_params = 0;
  std::vector<PsShard> shards;                  // by server
  std::vector<std::vector<PsPiece>> by_bucket;  // the pieces of bucket b, by server
  std::vector<std::vector<PsPiece>> by_server;  // server s's pieces, in bucket order
};

// Throws ConfigError when there are more servers than parameters (a shard would be empty).
PsLayout plan_ps_layout(int64_t num_params, const std::vector<Bucket>& buckets, int servers);

}  // namespace loom::sync
