// Alpha-beta costs of the collectives on a cluster of `nodes` x `gpus_per_node` GPUs, with an
// intra-node link and an inter-node link (nics_per_node NICs shared by the node's GPUs).
// time = alpha x (messages in sequence) + bytes on the busiest link / its bandwidth.
// Ring: Patarasuk & Yuan 2009; halving-doubling: Thakur, Rabenseifner & Gropp 2005;
// two-level: Horovod's hierarchical allreduce; parameter server: Li et al. OSDI 2014,
// per-direction volume as in BytePS (Jiang et al. OSDI 2020).
#pragma once

#include <string>
#include <vector>

#include "loom/perf/catalog.h"

namespace loom::perf {

enum class Algorithm { kRing, kHalvingDoubling, kTwoLevel, kParameterServer };

struct Topology {
  int nodes = 1;
  int gpus_per_node = 1;
  LinkSpec intra;  // GPU to GPU inside a node
  LinkSpec inter;  // node to node (one NIC's worth)
  int nics_per_node = 1;
  int servers = 1;  // parameter-server machines (each with one `inter` NIC)
  int ranks() const { return nodes * gpus_per_node; }
};

Algorithm algorithm_from_name(const std::string& name);  // ring, hd, two-level, ps
std::vector<std::string> algorithm_names();

// Seconds to allreduce `bytes` (the payload each rank contributes).
double allreduce_seconds(Algorithm a, const Topology& t, double bytes);
// Seconds to all-gather `bytes` from every rank to every rank (ring).
double allgather_seconds(const Topology& t, double bytes);

}  // namespace loom::perf
