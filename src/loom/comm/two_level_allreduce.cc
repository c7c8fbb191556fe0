// Two-level allreduce (see algorithms.h): reduce-scatter inside each machine, allreduce of each
// block across machines among the ranks that own it, allgather inside each machine.
//
// The stages run one after the other on two groups (group_communicator.h): the ranks of this
// rank's machine, and the ranks with this rank's local index on every machine. The two groups
// share no pair of ranks, and their tags come from this communicator's sequence, so no message
// of one stage can match a receive of another or of a later collective. Every rank draws the
// same tags: the cross-machine algorithm is chosen on the largest block (the same on every
// rank), not on this rank's own.
#include <fmt/format.h>

#include <vector>

#include "loom/comm/algorithms.h"
#include "loom/comm/group_communicator.h"
#include "loom/core/error.h"
#include "loom/core/trace.h"

namespace loom::comm::algo {

TwoLevelGroups two_level_groups(std::span<const int> machine_of_rank, int world_size, int rank) {
  const MachineLayout layout = machine_layout(machine_of_rank, world_size);
  const int L = layout.ranks_per_machine();
  if (L == 0) {
    throw ConfigError(
        fmt::format("two-level allreduce needs the same number of ranks on every machine; the "
                    "{} ranks run on {}",
                    world_size, layout.describe()));
  }
  TwoLevelGroups g;
  g.machines = layout.machines();
  g.per_machine = L;
  g.machine = -1;
  for (int m = 0; m < layout.machines() && g.machine < 0; ++m) {
    const auto& ranks = layout.ranks[size_t(m)];
    for (int i = 0; i < L; ++i) {
      if (ranks[size_t(i)] == rank) g.machine = m, g.local = i;
    }
  }
  LOOM_CHECK(g.machine >= 0, "rank {} is on no machine of {}", rank, layout.describe());
  g.intra = layout.ranks[size_t(g.machine)];
  for (const auto& ranks : layout.ranks) g.across.push_back(ranks[size_t(g.local)]);
  return g;
}

BlockRange two_level_owned(const TwoLevelGroups& g, size_t count) {
  const BlockRange block = block_range(count, g.per_machine, g.local);
  const BlockRange sub = block_range(block.size(), g.machines, g.machine);
  return {block.begin + sub.begin, block.begin + sub.end};
}

void two_level_allreduce(Communicator& c, std::span<const int> machine_of_rank, void* data,
                         size_t count, const Reducer& red) {
  const TwoLevelGroups g = two_level_groups(machine_of_rank, c.size(), c.rank());
  GroupCommunicator intra(c, g.intra);
  GroupCommunicator inter(c, g.across);

  const size_t es = red.elem_size;
  ring_reduce_scatter(intra, data, count, red);
  const BlockRange mine = block_range(count, g.per_machine, g.local);
  std::byte* block = static_cast<std::byte*>(data) + mine.begin * es;
  if (block_range(count, g.per_machine, 0).size() * es < c.options().small_message_bytes) {
    halving_doubling_allreduce(inter, block, mine.size(), red);
  } else {
    ring_allreduce(inter, block, mine.size(), red);
  }
  ring_allgather(intra, data, count, es);
}

BlockRange two_level_reduce_scatter(Communicator& c, std::span<const int> machine_of_rank,
                                    void* data, size_t count, const Reducer& red) {
  const TwoLevelGroups g = two_level_groups(machine_of_rank, c.size(), c.rank());
  GroupCommunicator intra(c, g.intra);
  GroupCommunicator inter(c, g.across);
  {
    trace::Span s("inside machine", "comm");
    ring_reduce_scatter(intra, data, count, red);
  }
  const BlockRange mine = block_range(count, g.per_machine, g.local);
  trace::Span s("across machines", "comm");
  ring_reduce_scatter(inter, static_cast<std::byte*>(data) + mine.begin * red.elem_size,
                      mine.size(), red);
  return two_level_owned(g, count);
}

void two_level_allgather(Communicator& c, std::span<const int> machine_of_rank, void* data,
                         size_t count, size_t elem_size) {
  const TwoLevelGroups g = two_level_groups(machine_of_rank, c.size(), c.rank());
  GroupCommunicator intra(c, g.intra);
  GroupCommunicator inter(c, g.across);
  const BlockRange mine = block_range(count, g.per_machine, g.local);
  {
    trace::Span s("across machines", "comm");
    ring_allgather(inter, static_cast<std::byte*>(data) + mine.begin * elem_size, mine.size(),
                   elem_size);
  }
  trace::Span s("inside machine", "comm");
  ring_allgather(intra, data, count, elem_size);
}

}  // namespace loom::comm::algo
