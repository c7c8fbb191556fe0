#include "loom/perf/collective_model.h"

#include <fmt/format.h>

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

// NCCL's base latency of a collective (tuning.cc, baseLat Ring/Simple).
constexpr double kLaunchS = 8.4e-6;

double launch_s(const Topology& t) {
  return t.intra.kind == "measured" || t.inter.kind == "measured" ? 0 : kLaunchS;
}

// What one of `flows` connections leaving a node at once gets of its NICs.
double per_flow(const Topology& t, double flows) {
  return t.inter.flow_bytes_per_s(flows * std::max(t.oversubscription, 1.0), t.nics_per_node);
}

// A ring through every node: one channel, hence one flow, per NIC.
double ring_node_rate(const Topology& t) {
  return t.nics_per_node * per_flow(t, t.nics_per_node);
}

// Alphas of a ring over all ranks: steps inside nodes and steps across them.
double ring_latency(const Topology& t, double steps_per_rank_hop) {
  const double n = t.ranks(), M = t.nodes;
  if (M <= 1) return steps_per_rank_hop * (n - 1) * t.intra.alpha_s();
  return steps_per_rank_hop * ((n - M) * t.intra.alpha_s() + (M - 1) * t.inter.alpha_s());
}

// The slowest edge of a ring through all ranks.
double ring_rate(const Topology& t) {
  if (t.nodes <= 1) return t.intra.bytes_per_s();
  return std::min(t.intra.bytes_per_s(), ring_node_rate(t));
}

double parameter_server(const Topology& t, double bytes) {
  const double M = t.nodes, K = t.gpus_per_node;
  const double ai = t.intra.alpha_s(), bi = t.intra.bytes_per_s();
  // On one node the server is the host: each GPU pushes and pulls over its own host link.
  if (M <= 1) return 2 * ai + bytes / bi;
  const double S = std::max(1.0, t.servers_colocated ? std::min<double>(t.servers, M) : t.servers);
  // What each worker machine pushes (and pulls back); summing it inside the machine first
  // (reduce, then broadcast the update) overlaps the pushes, bucket by bucket.
  const double W = t.aggregate ? bytes : K * bytes;
  const double intra = t.aggregate && K > 1 ? 2 * (K - 1) / K * bytes / bi : 0;
  // Pushes and pulls go to all servers at once: S connections share the machine's NICs.
  const double worker_rate = S * per_flow(t, S);
  double inter = 0;
  if (t.servers_colocated) {
    // A machine with a server: the other machines' pushes to it and its own pulls from the
    // other servers come in; the answers to their pulls and its own pushes go out.
    double busiest = (M - 1) * W / S + W * (S - 1) / S;
    if (S < M) busiest = std::max(busiest, W);  // a machine without a server
    inter = busiest / worker_rate;
  } else {
    // Servers apart, one NIC each: all M machines' pushes into S servers.
    const double server_rate = t.inter.bytes_per_s() / std::max(t.oversubscription, 1.0);
    inter = std::max(W / worker_rate, M * W / (S * server_rate));
  }
  return 2 * t.inter.alpha_s() + std::max(inter, intra);
}

}  // namespace

LinkBytes two_level_link_bytes(const Topology& t, double bytes) {
  const double M = t.nodes, K = t.gpus_per_node;
  LinkBytes b;
  b.intra = 2 * (K - 1) / K * bytes;
  b.inter = 2 * (M - 1) / M * bytes / K;
  return b;
}

LinkBytes two_level_codec_link_bytes(const Topology& t, double bytes, const CodecModel& codec) {
  if (codec.collectives != 1)
    throw InputError(
        fmt::format("codec {} has no two-level exchange (its factors need whole "
                    "matrices; its allreduces run two-level in fp32)",
                    codec.name));
  const double M = t.nodes, K = t.gpus_per_node;
  LinkBytes b = two_level_link_bytes(t, bytes);
  const double shard = codec.ratio() * bytes / K;
  b.inter =
      codec.aggregation == Aggregation::kAllgather ? (M - 1) * shard : 2 * (M - 1) / M * shard;
  return b;
}

double two_level_codec_seconds(const Topology& t, double bytes, const CodecModel& codec) {
  const double M = t.nodes, K = t.gpus_per_node;
  if (t.ranks() <= 1 || bytes <= 0) return 0;
  const LinkBytes b = two_level_codec_link_bytes(t, bytes, codec);
  const double ai = t.intra.alpha_s(), ae = t.inter.alpha_s();
  const double intra = K > 1 ? 2 * (K - 1) * ai + b.intra / t.intra.bytes_per_s() : 0;
  // Messages in sequence across nodes: a ring allreduce's 2(M-1); the stripes' all-to-all
  // (M-1) and ring allgather (M-1); top-k's ring allgather (M-1). An extra launch for the
  // stripes' second collective, as stripe_exchange_seconds.
  double inter = 0;
  if (M > 1) {
    const double steps = codec.aggregation == Aggregation::kAllgather ? M - 1 : 2 * (M - 1);
    inter = steps * ae + b.inter / per_flow(t, K) +
            (codec.aggregation == Aggregation::kStripeExchange ? launch_s(t) : 0);
  }
  return launch_s(t) + intra + inter;
}

double allreduce_seconds(Algorithm a, const Topology& t, double bytes) {
  const double n = t.ranks(), M = t.nodes, K = t.gpus_per_node;
  if (n <= 1 || bytes <= 0) return 0;
  const double ai = t.intra.alpha_s(), bi = t.intra.bytes_per_s();
  const double ae = t.inter.alpha_s();
  switch (a) {
    case Algorithm::kRing:
      return launch_s(t) + ring_latency(t, 2) + 2 * (n - 1) / n * bytes / ring_rate(t);
    case Algorithm::kHalvingDoubling: {
      // Reduce-scatter by recursive halving, all-gather by doubling: 2 log2(n) messages,
      // 2 (n-1)/n S per rank. Across nodes it runs on each GPU's 1/K after the node's own
      // halving steps, all K GPUs of a node crossing its NICs at once.
      const double intra = K > 1 ? 2 * std::log2(K) * ai + 2 * (K - 1) / K * bytes / bi : 0;
      const double inter =
          M > 1 ? 2 * std::log2(M) * ae + 2 * (M - 1) / M * (bytes / K) / per_flow(t, K) : 0;
      return launch_s(t) + intra + inter;
    }
    case Algorithm::kTwoLevel: {
      // Intra-node reduce-scatter and all-gather (K-1 steps each), inter-node ring allreduce
      // of each GPU's 1/K shard (2(M-1) steps; the K rings cross the node's NICs at once).
      // The stages run one after the other, as in comm::algo::two_level_allreduce.
      const LinkBytes b = two_level_link_bytes(t, bytes);
      const double intra = K > 1 ? 2 * (K - 1) * ai + b.intra / bi : 0;
      const double inter = M > 1 ? 2 * (M - 1) * ae + b.inter / per_flow(t, K) : 0;
      return launch_s(t) + intra + inter;
    }
    case Algorithm::kParameterServer:
      return launch_s(t) + parameter_server(t, bytes);
  }
  return 0;
}

double allgather_seconds(const Topology& t, double bytes) {
  const double n = t.ranks();
  if (n <= 1 || bytes <= 0) return 0;
  return launch_s(t) + ring_latency(t, 1) + (n - 1) * bytes / ring_rate(t);
}

double stripe_exchange_seconds(const Topology& t, double bytes) {
  const double n = t.ranks(), M = t.nodes, K = t.gpus_per_node;
  if (n <= 1 || bytes <= 0) return 0;
  const double bi = t.intra.bytes_per_s();
  // All-to-all: each rank sends n-1 stripes of S/n, those to other nodes through NICs that
  // all K ranks of the node use at once.
  double a2a = 0;
  if (M <= 1) {
    a2a = (n - 1) * t.intra.alpha_s() + (n - 1) / n * bytes / bi;
  } else {
    a2a = (n - 1) * std::max(t.intra.alpha_s(), t.inter.alpha_s()) +
          std::max((K - 1) / n * bytes / bi, (n - K) / n * bytes / per_flow(t, K));
  }
  // All-gather of the owners' stripes: a ring of n - 1 steps, S/n each.
  const double gather = ring_latency(t, 1) + (n - 1) / n * bytes / ring_rate(t);
  return 2 * launch_s(t) + a2a + gather;
}

}  // namespace loom::perf
