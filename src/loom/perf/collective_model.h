// Alpha-beta costs of the collectives on a cluster of `nodes` x `gpus_per_node` GPUs, with an
// intra-node link and an inter-node link (nics_per_node NICs shared by the node's GPUs).
// time = launch + alpha per message in sequence + bytes on the busiest link / its bandwidth.
//   launch     NCCL's base latency per collective, Ring/Simple 8.4 us (NCCL tuning.cc,
//              hardware.md D5); none on links this machine measured (their alpha has it).
//   per hop    each step pays its own link's alpha: a ring allreduce over n ranks on M nodes
//              makes 2(n-M) steps inside nodes and 2(M-1) across them (NCCL's model:
//              (nsteps - nInterSteps) x intraLat + nInterSteps x interLat).
//   hierarchy  a ring enters and leaves each node once, so the node's NICs carry one rank's
//              traffic (one flow per NIC); traffic every GPU sends to other nodes at once
//              (all-to-all, the inter-node part of two-level and halving-doubling, a parameter
//              server without local aggregation) shares the NICs. `oversubscription` divides
//              what the fabric gives each node; a link's `flow_gbs` caps each connection.
// Ring: Patarasuk & Yuan 2009; halving-doubling: Thakur, Rabenseifner & Gropp 2005;
// two-level: Horovod's hierarchical allreduce; parameter server: Li et al. OSDI 2014, with
// servers on the worker machines or apart and per-machine aggregation as in BytePS (Jiang et
// al. OSDI 2020); stripe exchange: CNTK 1-bit SGD and DeepSpeed's compressed allreduce (each
// rank sends every owner its stripe, owners gather the re-encoded sums).
#pragma once

#include <string>
#include <vector>

#include "loom/perf/catalog.h"
#include "loom/perf/codec_model.h"

namespace loom::perf {

enum class Algorithm { kRing, kHalvingDoubling, kTwoLevel, kParameterServer };

struct Topology {
  int nodes = 1;
  int gpus_per_node = 1;
  LinkSpec intra;  // GPU to GPU inside a node
  LinkSpec inter;  // node to node (one NIC's worth)
  int nics_per_node = 1;
  int servers = 1;  // parameter-server machines (each with one `inter` NIC)
  // The fabric's oversubscription: each node gets 1/oversubscription of its NICs' rate for
  // traffic to other nodes (1: a full-bisection fabric).
  double oversubscription = 1;
  bool servers_colocated = false;  // parameter servers run on worker machines
  bool aggregate = false;          // a machine sums its GPUs' gradients before pushing
  // Every node is the same machine (network namespaces on one host): the host model's CPU
  // rates are shared by all ranks, not by each node's own (cost_model.h).
  bool nodes_share_host = false;
  int ranks() const { return nodes * gpus_per_node; }
  // Ranks whose threads share one machine's cores.
  int ranks_per_host() const { return nodes_share_host ? ranks() : gpus_per_node; }
};

Algorithm algorithm_from_name(const std::string& name);  // ring, hd, two-level, ps
std::vector<std::string> algorithm_names();

// Bytes each rank of a two-level allreduce of `bytes` sends: to ranks of its own node
// (reduce-scatter and allgather among K ranks: 2(K-1)/K x bytes) and to other nodes (a ring
// allreduce of its 1/K block among M nodes: 2(M-1)/M x bytes/K), as loom's
// comm::algo::two_level_allreduce sends them (tests/measure/two_level_traffic_test.cc counts).
struct LinkBytes {
  double intra = 0;
  double inter = 0;
};
LinkBytes two_level_link_bytes(const Topology& t, double bytes);

// A codec's exchange in two levels, as loom's sync::two_level_compressed_allreduce runs it: the
// reduce-scatter and all-gather inside each node stay fp32 (the bytes and steps of
// two_level_link_bytes), and only the exchange across nodes of each GPU's 1/K shard is encoded,
// among the M GPUs with one local index, one per node: per rank 2(M-1)/M x ratio x bytes/K for a
// codec summed in an allreduce or in stripes (each stripe to its owner, the owners' re-encoded
// sums gathered), (M-1) x ratio x bytes/K for one whose encodings are all-gathered (top-k). The
// K shards cross each node's NICs at once. PowerSGD is not exchanged this way (its factors need
// whole matrices; loom allreduces them two-level in fp32 instead): InputError.
LinkBytes two_level_codec_link_bytes(const Topology& t, double bytes, const CodecModel& codec);
// Seconds of that exchange for `bytes` of fp32 gradient per rank.
double two_level_codec_seconds(const Topology& t, double bytes, const CodecModel& codec);

// Seconds to allreduce `bytes` (the payload each rank contributes).
double allreduce_seconds(Algorithm a, const Topology& t, double bytes);
// Seconds to all-gather `bytes` from every rank to every rank (ring).
double allgather_seconds(const Topology& t, double bytes);
// Seconds to combine `bytes` of encodings that cannot be summed as sent: every rank sends the
// owner of each 1/n stripe its part (all-to-all), owners decode, sum and re-encode, and the
// owners' stripes are all-gathered (ring).
double stripe_exchange_seconds(const Topology& t, double bytes);

}  // namespace loom::perf
