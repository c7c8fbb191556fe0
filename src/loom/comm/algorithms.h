// The collective algorithms, each written once on a Communicator's point-to-point calls (one
// algorithm per file), so they run over every transport. Communicator's default collectives
// pick among them; tests call each one directly so a transport's native override cannot hide
// a broken algorithm. Sizes are in elements of reducer.elem_size (or bytes where no reducer).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "loom/comm/communicator.h"

namespace loom::comm::algo {

// Ring reduce-scatter (Patarasuk & Yuan, JPDC 2009): n-1 steps; at step s rank r sends block
// (r-s-1) to r+1 and reduces block (r-s-2) from r-1, so rank r ends owning block r. Each block
// travels in chunks of options().ring_chunk_bytes, and a chunk is forwarded as soon as it is
// reduced, so the steps overlap (pipelining).
void ring_reduce_scatter(Communicator& c, void* data, size_t count, const Reducer& r);

// Ring allgather: n-1 steps, rank r starts owning block r; chunks are forwarded on arrival.
void ring_allgather(Communicator& c, void* data, size_t count, size_t elem_size);

// Ring allreduce = ring reduce-scatter + ring allgather: each rank sends 2(n-1)/n of the data.
void ring_allreduce(Communicator& c, void* data, size_t count, const Reducer& r);

// Recursive halving (reduce-scatter) then recursive doubling (allgather), Rabenseifner's
// algorithm (Thakur, Rabenseifner & Gropp, IJHPCA 2005): 2 log2(p) steps. For a world size
// that is not a power of two, the first 2*rem ranks pair up (even sends to odd) before and
// after, rem = n - 2^floor(log2 n). Fewer messages than the ring: for small buffers.
void halving_doubling_allreduce(Communicator& c, void* data, size_t count, const Reducer& r);

// Two-level (hierarchical) allreduce, as Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE: with M machines
// of L ranks each (`machine_of_rank`, as Communicator::machine_of_rank), (1) ring reduce-scatter
// among the L ranks of each machine, so local rank i holds its machine's sum of block i
// (block_range(count, L, i)); (2) allreduce of block i among the M ranks with local rank i, one per
// machine (ring, or halving-doubling where the largest block is under
// options().small_message_bytes); (3) ring allgather inside each machine. Per rank: 2(L-1)/L of the
// data to ranks of its own machine, 2(M-1)/M of its 1/L block to other machines (the ring's
// 2(n-1)/n in all, with (L-1)/L of it kept inside the machine). Any reducer. Machines with
// different numbers of ranks: ConfigError. Local rank i is the i-th lowest rank of its machine;
// ranks need not be numbered machine by machine.
void two_level_allreduce(Communicator& c, std::span<const int> machine_of_rank, void* data,
                         size_t count, const Reducer& r);

// One rank's place in a two-level collective: its machine (numbered by lowest rank, as
// machine_layout) and local index, the ranks of its machine (`intra`, local index order) and
// the ranks with its local index on every machine (`across`, machine order). Build a
// GroupCommunicator on each to run the stages. Machines with different numbers of ranks:
// ConfigError.
struct TwoLevelGroups {
  int machines = 1, per_machine = 1;  // M, L
  int machine = 0, local = 0;
  std::vector<int> intra, across;
};
TwoLevelGroups two_level_groups(std::span<const int> machine_of_rank, int world_size, int rank);

// The two halves of two_level_allreduce, for a sharded update (ZeRO stage 1) across machines:
// two_level_reduce_scatter runs the ring reduce-scatter inside the machine (local rank i holds
// its machine's sum of block i = block_range(count, L, i)), then a ring reduce-scatter of block i
// across machines, so the rank on machine m ends owning sub-block m of block i
// (two_level_owned) with the sum over all ranks; it returns that range. two_level_allgather is
// its inverse: every rank starts owning two_level_owned and ends with the whole buffer. Together
// they send what two_level_allreduce sends (with a ring across machines) and every rank owns
// about count / (L M) elements, as with the flat reduce-scatter.
BlockRange two_level_owned(const TwoLevelGroups& g, size_t count);
BlockRange two_level_reduce_scatter(Communicator& c, std::span<const int> machine_of_rank,
                                    void* data, size_t count, const Reducer& r);
void two_level_allgather(Communicator& c, std::span<const int> machine_of_rank, void* data,
                         size_t count, size_t elem_size);

// Binomial tree broadcast from `root`: ceil(log2 n) rounds.
void binomial_broadcast(Communicator& c, void* data, size_t bytes, int root);

// Dissemination barrier (Hensgen, Finkel & Manber 1988): ceil(log2 n) rounds of empty
// messages; rank r signals r + 2^k and waits for r - 2^k.
void dissemination_barrier(Communicator& c);

}  // namespace loom::comm::algo
