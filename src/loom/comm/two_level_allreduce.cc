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

namespace loom::comm::algo {

void two_level_allreduce(Communicator& c, std::span<const int> machine_of_rank, void* data,
                         size_t count, const Reducer& red) {
  const MachineLayout layout = machine_layout(machine_of_rank, c.size());
  const int L = layout.ranks_per_machine();
  if (L == 0) {
    throw ConfigError(
        fmt::format("two-level allreduce needs the same number of ranks on every machine; the "
                    "{} ranks run on {}",
                    c.size(), layout.describe()));
  }
  // This rank's machine and local index.
  int my_machine = -1, local = -1;
  for (int m = 0; m < layout.machines() && my_machine < 0; ++m) {
    const auto& ranks = layout.ranks[size_t(m)];
    for (int i = 0; i < L; ++i) {
      if (ranks[size_t(i)] == c.rank()) my_machine = m, local = i;
    }
  }
  std::vector<int> across;
  for (const auto& ranks : layout.ranks) across.push_back(ranks[size_t(local)]);
  GroupCommunicator intra(c, layout.ranks[size_t(my_machine)]);
  GroupCommunicator inter(c, std::move(across));

  const size_t es = red.elem_size;
  ring_reduce_scatter(intra, data, count, red);
  const BlockRange mine = block_range(count, L, local);
  std::byte* block = static_cast<std::byte*>(data) + mine.begin * es;
  if (block_range(count, L, 0).size() * es < c.options().small_message_bytes) {
    halving_doubling_allreduce(inter, block, mine.size(), red);
  } else {
    ring_allreduce(inter, block, mine.size(), red);
  }
  ring_allgather(intra, data, count, es);
}

}  // namespace loom::comm::algo
