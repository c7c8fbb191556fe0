// Compressed allreduce in two levels: the codec on the slow link only.
//
// With M machines of L ranks each (Communicator::machine_of_rank; comm.ranks_per_node fakes
// them), a bucket of n floats is combined in three stages, as comm::algo::two_level_allreduce
// does for plain floats:
//   1. ring reduce-scatter in fp32 among the L ranks of each machine: local rank i then holds
//      its machine's exact sum of node-shard i, block_range(n, L, i);
//   2. compressed_allreduce (compressed_allreduce.h) of shard i among the M ranks with local
//      index i, one per machine, as if each machine were one rank contributing its sum;
//   3. ring allgather in fp32 among the L ranks of each machine.
// Only stage 2 crosses machines and only stage 2 encodes: the intra-machine stages move fp32
// over the fast link, and the bytes across machines are the codec's for an allreduce of n / L
// floats among M ranks (two_level_wire_bytes). Each of the L ranks of a machine is the leader of
// its own shard, so all L cross-machine exchanges run at once over the machine's NICs.
//
// Error feedback lives per node-shard: the rank on machine m with local index i holds the
// residuals of shard i's exchange (its worker-side residual for every one of the M stripes of
// the shard, and the owner-side residual of stripe m), i.e. the part of its machine's summed
// gradient for shard i that the codec has not sent yet. No rank holds a residual of the bucket
// outside its shard, and the residuals of one machine's L ranks tile the bucket once. Summed
// over steps, the outputs equal the summed inputs minus the residuals of all ranks (the
// telescoping of compressed_allreduce, with each machine's sum as one input), to fp32 rounding
// of the intra-machine sums.
//
// Codecs summed in stripes (fp32 identity, fp16, bf16, int8, onebit) and top-k (gathered) run
// this way. PowerSGD does not: its low-rank factors are products of whole matrices, which the
// node-shards cut, and its two float allreduces already go through the communicator, which
// runs them two-level (can_two_level). A bucket of fewer floats than L (some shard empty) is
// summed exactly in fp32.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "loom/comm/algorithms.h"
#include "loom/sync/allreduce/compressed_allreduce.h"

namespace loom::sync {

struct TwoLevelCompressedState {
  size_t n = 0;
  std::vector<int> machine_of_rank;
  comm::algo::TwoLevelGroups groups;
  comm::BlockRange shard;          // this rank's node-shard of the bucket
  CompressedAllreduceState cross;  // shard's exchange across machines (world M, rank = machine)
  // Bytes this rank sends per call: to ranks of its own machine (fp32, stages 1 and 3) and to
  // other machines (encoded, stage 2).
  size_t intra_bytes = 0, inter_bytes = 0;
  size_t wire_bytes() const { return intra_bytes + inter_bytes; }

  // Adds this rank's residuals (those of its node-shard) into acc (n elements, the bucket).
  void add_residuals(std::span<double> acc) const;
};

// Whether a codec may run two-level: everything compressed_allreduce sums but PowerSGD.
bool can_two_level(const compress::Codec& codec);

// `machine_of_rank` as Communicator::machine_of_rank (the same number of ranks on every machine,
// else ConfigError). `aggregation` as make_compressed_allreduce_state, for the cross stage.
TwoLevelCompressedState make_two_level_compressed_state(
    const compress::Codec& codec, size_t n, std::span<const int> machine_of_rank, int world,
    int rank, const std::string& bucket,
    std::optional<compress::Aggregation> aggregation = std::nullopt);

// In place: data becomes the decoded sum over all ranks, the same bits on every rank. Every rank
// calls with the same codec, bucket size and order. NaN/Inf throws NumericError naming the
// bucket's shard on the rank whose shard holds it (the others then fail with a CommError).
void two_level_compressed_allreduce(comm::Communicator& c, const compress::Codec& codec,
                                    std::span<float> data, TwoLevelCompressedState& st);

// Bytes one rank sends per two_level_compressed_allreduce, inside its machine and across.
struct TwoLevelWireBytes {
  size_t intra = 0, inter = 0;
};
TwoLevelWireBytes two_level_wire_bytes(
    const compress::Codec& codec, size_t n, const comm::algo::TwoLevelGroups& g,
    std::optional<compress::Aggregation> aggregation = std::nullopt);

}  // namespace loom::sync
