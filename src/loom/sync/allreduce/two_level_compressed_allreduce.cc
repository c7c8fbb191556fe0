#include "loom/sync/allreduce/two_level_compressed_allreduce.h"

#include <fmt/format.h>

#include "loom/comm/group_communicator.h"
#include "loom/core/error.h"
#include "loom/core/trace.h"

namespace loom::sync {

using compress::Aggregation;
using compress::Codec;

bool can_two_level(const Codec& codec) {
  return codec.aggregation() != Aggregation::kLinear;
}

void TwoLevelCompressedState::add_residuals(std::span<double> acc) const {
  LOOM_CHECK_EQ(acc.size(), n);
  if (shard.size() == 0) return;
  cross.add_residuals(acc.subspan(shard.begin, shard.size()));
}

TwoLevelWireBytes two_level_wire_bytes(const Codec& codec, size_t n,
                                       const comm::algo::TwoLevelGroups& g,
                                       std::optional<Aggregation> aggregation) {
  const int L = g.per_machine, i = g.local;
  TwoLevelWireBytes b;
  if (L > 1) {
    // The ring reduce-scatter sends every block but this rank's own, the ring allgather every
    // block but its right neighbour's (algorithms.h).
    b.intra =
        (2 * n - comm::block_range(n, L, i).size() - comm::block_range(n, L, (i + 1) % L).size()) *
        sizeof(float);
  }
  const size_t shard = comm::block_range(n, L, i).size();
  if (n < size_t(L)) {  // summed exactly in fp32 (two_level_compressed_allreduce)
    b.inter = 2 * size_t(g.machines - 1) * shard * sizeof(float) / size_t(g.machines);
  } else {
    b.inter = compressed_allreduce_wire_bytes(codec, shard, g.machines,
                                              aggregation.value_or(codec.aggregation()));
  }
  return b;
}

TwoLevelCompressedState make_two_level_compressed_state(const Codec& codec, size_t n,
                                                        std::span<const int> machine_of_rank,
                                                        int world, int rank,
                                                        const std::string& bucket,
                                                        std::optional<Aggregation> aggregation) {
  LOOM_CHECK(can_two_level(codec), "codec {} cannot run two-level", codec.name());
  TwoLevelCompressedState st;
  st.n = n;
  st.machine_of_rank.assign(machine_of_rank.begin(), machine_of_rank.end());
  st.groups = comm::algo::two_level_groups(machine_of_rank, world, rank);
  st.shard = comm::block_range(n, st.groups.per_machine, st.groups.local);
  st.cross = make_compressed_allreduce_state(
      codec, st.shard.size(), st.groups.machines, st.groups.machine,
      fmt::format("{} (node-shard {} of {})", bucket, st.groups.local, st.groups.per_machine), {},
      aggregation);
  const TwoLevelWireBytes b = two_level_wire_bytes(codec, n, st.groups, aggregation);
  st.intra_bytes = b.intra;
  st.inter_bytes = b.inter;
  return st;
}

void two_level_compressed_allreduce(comm::Communicator& c, const Codec& codec,
                                    std::span<float> data, TwoLevelCompressedState& st) {
  LOOM_CHECK_EQ(data.size(), st.n);
  LOOM_CHECK(c.size() == st.groups.machines * st.groups.per_machine,
             "a two-level state for {} x {} ranks used on {}", st.groups.machines,
             st.groups.per_machine, c.size());
  if (st.n < size_t(st.groups.per_machine)) {
    // Some node-shard is empty, and an empty compressed exchange sends nothing and draws no
    // tags, while the other shards' exchanges draw theirs: the ranks would disagree on the tags
    // of every later collective. A bucket this small is summed exactly (it is under L floats).
    comm::algo::two_level_allreduce(c, st.machine_of_rank, data.data(), data.size(),
                                    comm::sum_f32());
    return;
  }
  comm::GroupCommunicator intra(c, st.groups.intra);
  comm::GroupCommunicator inter(c, st.groups.across);
  trace::Span phase;  // timeline (core/trace.h)
  phase.next("reduce-scatter in machine", "comm");
  comm::algo::ring_reduce_scatter(intra, data.data(), data.size(), comm::sum_f32());
  phase.next("compressed across machines", "comm");
  // Every rank runs the same collectives in the same order (each on its own shard), so every
  // rank draws the same tags from c.
  compressed_allreduce(inter, codec, data.subspan(st.shard.begin, st.shard.size()), st.cross);
  phase.next("allgather in machine", "comm");
  comm::algo::ring_allgather(intra, data.data(), data.size(), sizeof(float));
}

}  // namespace loom::sync
