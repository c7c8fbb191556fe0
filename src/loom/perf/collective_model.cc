#include "loom/perf/collective_model.h"

#include <algorithm>
#include <cmath>

#include "loom/core/error.h"

namespace loom::perf {

std::vector<std::string> algorithm_names() {
  return {"ring", "hd", "two-level", "ps"};
}

Algorithm algorithm_from_name(const std::string& name) {
  if (name == "ring") return Algorithm::kRing;
  if (name == "hd" || name == "halving-doubling") return Algorithm::kHalvingDoubling;
  if (name == "two-level") return Algorithm::kTwoLevel;
  if (name == "ps") return Algorithm::kParameterServer;
  throw InputError(unknown_name_message("algorithm", name, algorithm_names(), "or bmuf"));
}

namespace {

// Ring allreduce over n ranks on one kind of link: 2(n-1) steps of S/n each.
double ring(double n, double bytes, double alpha, double bw) {
  if (n <= 1) return 0;
  return 2 * (n - 1) * alpha + 2 * (n - 1) / n * bytes / bw;
}

// Bandwidth of the NIC share: a ring that visits the nodes in order crosses each node
// boundary once per direction, so the node's NICs carry one rank's ring traffic.
double nic_bw(const Topology& t) {
  return t.inter.bytes_per_s() * t.nics_per_node;
}

}  // namespace

double allreduce_seconds(Algorithm a, const Topology& t, double bytes) {
  const double n = t.ranks(), M = t.nodes, K = t.gpus_per_node;
  if (n <= 1 || bytes <= 0) return 0;
  const double ai = t.intra.alpha_s(), bi = t.intra.bytes_per_s();
  const double ae = t.inter.alpha_s(), be = nic_bw(t);
  switch (a) {
    case Algorithm::kRing: {
      if (M <= 1) return ring(n, bytes, ai, bi);
      // One flat ring: every step waits for its slowest edge.
      return ring(n, bytes, std::max(ai, ae), std::min(bi, be));
    }
    case Algorithm::kHalvingDoubling: {
      // Reduce-scatter by recursive halving, all-gather by doubling: 2 log2(n) messages,
      // 2 (n-1)/n S per rank. The steps between nodes move S (M-1)/M per GPU each way, and
      // all K GPUs of a node cross the NICs at once.
      double intra = K > 1 ? 2 * std::log2(K) * ai + 2 * (K - 1) / K * (bytes / M) / bi : 0;
      double inter = M > 1 ? 2 * std::log2(M) * ae + 2 * (M - 1) / M * bytes * K / be : 0;
      return intra + inter;
    }
    case Algorithm::kTwoLevel: {
      // Intra-node reduce-scatter, inter-node ring allreduce of each GPU's 1/K shard (the K
      // shards share the node's NICs), intra-node all-gather.
      double rs = K > 1 ? (K - 1) * ai + (K - 1) / K * bytes / bi : 0;
      double inter = M > 1 ? 2 * (M - 1) * ae + 2 * (M - 1) / M * (bytes / K) * K / be : 0;
      return 2 * rs + inter;
    }
    case Algorithm::kParameterServer: {
      // Workers push S and pull S; pipelined over buckets and full duplex, so each direction
      // carries S per worker. The node's GPUs share its NICs; the servers share the n pushes.
      // On one node the server is the host: GPUs reach it over their own host link.
      if (M <= 1) return 2 * ai + bytes / bi;
      double worker = K * bytes / be;
      double server = n * bytes / (t.servers * t.inter.bytes_per_s());
      return 2 * ae + std::max(worker, server);
    }
  }
  return 0;
}

double allgather_seconds(const Topology& t, double bytes) {
  const double n = t.ranks();
  if (n <= 1 || bytes <= 0) return 0;
  if (t.nodes <= 1) return (n - 1) * t.intra.alpha_s() + (n - 1) * bytes / t.intra.bytes_per_s();
  double alpha = std::max(t.intra.alpha_s(), t.inter.alpha_s());
  double bw = std::min(t.intra.bytes_per_s(), nic_bw(t));
  return (n - 1) * alpha + (n - 1) * bytes / bw;
}

}  // namespace loom::perf
