#include "loom/perf/collective_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loom/compress/onebit_codec.h"
#include "loom/core/error.h"

namespace loom::perf {
namespace {

LinkSpec link(double gbs, double us) {
  return {"l", "test", gbs, us, 1.0, "test"};
}

constexpr double kLaunch = 8.4e-6;  // NCCL's base latency per collective

TEST(Collectives, RingOnOneNodeIsTheTextbookFormula) {
  Topology t{1, 4, link(10, 5), link(1, 50)};
  double S = 100e6;
  // launch + 2(n-1) alpha + 2(n-1)/n S / B
  EXPECT_NEAR(allreduce_seconds(Algorithm::kRing, t, S), kLaunch + 6 * 5e-6 + 1.5 * S / 10e9,
              1e-12);
  EXPECT_EQ(allreduce_seconds(Algorithm::kRing, Topology{1, 1, link(10, 5), link(1, 5)}, S), 0);
}

TEST(Collectives, RingAcrossNodesPaysEachHopsAlphaAndRunsAtTheNic) {
  Topology t{2, 2, link(10, 5), link(1, 50)};
  double S = 100e6;
  // 2(n - M) steps inside nodes, 2(M - 1) across; the NIC carries one rank's traffic.
  EXPECT_NEAR(allreduce_seconds(Algorithm::kRing, t, S),
              kLaunch + 4 * 5e-6 + 2 * 50e-6 + 1.5 * S / 1e9, 1e-12);
  t.nics_per_node = 2;  // a ring channel per NIC
  EXPECT_NEAR(allreduce_seconds(Algorithm::kRing, t, S),
              kLaunch + 4 * 5e-6 + 2 * 50e-6 + 1.5 * S / 2e9, 1e-12);
}

TEST(Collectives, MeasuredLinksCarryTheirOwnLaunchCost) {
  LinkSpec m = link(10, 5);
  m.kind = "measured";
  Topology t{1, 4, m, m};
  EXPECT_NEAR(allreduce_seconds(Algorithm::kRing, t, 100e6), 6 * 5e-6 + 1.5 * 100e6 / 10e9, 1e-12);
}

TEST(Collectives, TwoLevelMovesTheSameBytesOverTheNicButFewerSlowSteps) {
  Topology t{4, 4, link(10, 5), link(1, 50)};
  double S = 64e6;
  double rs = 3 * 5e-6 + 0.75 * S / 10e9;
  double inter = 2 * 3 * 50e-6 + 2 * 0.75 * S / 1e9;
  EXPECT_NEAR(allreduce_seconds(Algorithm::kTwoLevel, t, S), kLaunch + 2 * rs + inter, 1e-12);
  EXPECT_LT(allreduce_seconds(Algorithm::kTwoLevel, t, 1e3),
            allreduce_seconds(Algorithm::kRing, t, 1e3));
}

TEST(Collectives, TwoLevelCodecEncodesOnlyTheCrossNodeStage) {
  Topology t{4, 4, link(10, 5), link(1, 50)};
  const double S = 64e6;
  const double rs = 3 * 5e-6 + 0.75 * S / 10e9;  // each fp32 stage inside a node
  // 1-bit: 1 bit per element and two floats per column of loom's default width; stripes to
  // their owners, owners' sums gathered.
  const CodecModel onebit = codec_model("onebit");
  const double r = (1 + 64.0 / double(compress::kOnebitDefaultColumn)) / 32;
  const LinkBytes b = two_level_codec_link_bytes(t, S, onebit);
  EXPECT_NEAR(b.intra, 2 * 0.75 * S, 1e-3);            // fp32, as without a codec
  EXPECT_NEAR(b.inter, 2 * 0.75 * (S / 4) * r, 1e-3);  // the fp32 shard's, times the ratio
  // 4 shards cross the 1 GB/s NIC at once (0.25 GB/s each); the stripes' two collectives.
  EXPECT_NEAR(two_level_codec_seconds(t, S, onebit),
              2 * kLaunch + 2 * rs + 2 * 3 * 50e-6 + 2 * 0.75 * (S / 4) * r / 0.25e9, 1e-12);
  // Top-k's encodings are all-gathered: (M-1) shards' worth, M-1 messages.
  const CodecModel topk = codec_model("topk");
  EXPECT_NEAR(two_level_codec_link_bytes(t, S, topk).inter, 3 * (S / 4) * topk.ratio(), 1e-3);
  EXPECT_NEAR(two_level_codec_seconds(t, S, topk),
              kLaunch + 2 * rs + 3 * 50e-6 + 3 * (S / 4) * topk.ratio() / 0.25e9, 1e-12);
  // fp32 through it is the plain two-level allreduce; fp16 halves only the NIC term.
  EXPECT_NEAR(two_level_codec_seconds(t, S, codec_model("fp32")),
              allreduce_seconds(Algorithm::kTwoLevel, t, S), 1e-12);
  EXPECT_NEAR(two_level_codec_seconds(t, S, codec_model("fp32")) -
                  two_level_codec_seconds(t, S, codec_model("fp16")),
              0.5 * 2 * 0.75 * S / 1e9, 1e-9);
  EXPECT_THROW(two_level_codec_seconds(t, S, codec_model("powersgd")), InputError);
}

TEST(Collectives, OversubscriptionAndFlowCapsSlowTheSharedNic) {
  Topology t{4, 4, link(10, 5), link(1, 50)};
  const double S = 64e6, base = allreduce_seconds(Algorithm::kTwoLevel, t, S);
  t.oversubscription = 2;
  const double over = allreduce_seconds(Algorithm::kTwoLevel, t, S);
  EXPECT_NEAR(over - base, 2 * 0.75 * S / 1e9, 1e-9);  // the NIC term doubles
  t.oversubscription = 1;
  t.inter.flow_gbs = 0.1;  // 4 flows of 0.1 GB/s cannot fill the 1 GB/s NIC
  EXPECT_NEAR(allreduce_seconds(Algorithm::kTwoLevel, t, S) - base,
              2 * 0.75 * (S / 4) / 0.1e9 - 2 * 0.75 * S / 1e9, 1e-9);
}

TEST(Collectives, HalvingDoublingHasLogSteps) {
  Topology t{1, 8, link(10, 5), link(1, 50)};
  double S = 1e3;
  EXPECT_NEAR(allreduce_seconds(Algorithm::kHalvingDoubling, t, S),
              kLaunch + 2 * 3 * 5e-6 + 2 * 7.0 / 8 * S / 10e9, 1e-12);
}

TEST(Collectives, ParameterServerIsBoundByServersOrWorkerNics) {
  Topology t{8, 1, link(10, 5), link(1, 10)};
  double S = 1e9;
  t.servers = 1;  // 8 pushes into one server NIC
  EXPECT_NEAR(allreduce_seconds(Algorithm::kParameterServer, t, S), kLaunch + 2 * 10e-6 + 8.0,
              1e-9);
  t.servers = 8;
  EXPECT_NEAR(allreduce_seconds(Algorithm::kParameterServer, t, S), kLaunch + 2 * 10e-6 + 1.0,
              1e-9);
  // Servers on the 8 workers: each machine serves 1/8 to 7 others and pulls 7/8 for itself.
  t.servers_colocated = true;
  EXPECT_NEAR(allreduce_seconds(Algorithm::kParameterServer, t, S),
              kLaunch + 2 * 10e-6 + 2 * 7.0 / 8, 1e-9);
  EXPECT_THROW(algorithm_from_name("tree"), InputError);
}

TEST(Collectives, StripeExchangeSharesTheNicAmongTheNodesGpusButARingDoesNot) {
  Topology t{8, 8, link(100, 1), link(1, 10)};
  const double S = 64e6;
  // On one node it costs what a ring allreduce of the same bytes costs (plus one launch).
  Topology one{1, 8, link(100, 1), link(1, 10)};
  EXPECT_NEAR(stripe_exchange_seconds(one, S),
              allreduce_seconds(Algorithm::kRing, one, S) + kLaunch, 1e-12);
  // Across nodes: all 8 GPUs' stripes to other nodes cross the NIC at once.
  const double a2a = 63 * 10e-6 + 56.0 / 64 * S / (1e9 / 8);
  const double gather = 56 * 1e-6 + 7 * 10e-6 + 63.0 / 64 * S / 1e9;
  EXPECT_NEAR(stripe_exchange_seconds(t, S), 2 * kLaunch + a2a + gather, 1e-9);
}

}  // namespace
}  // namespace loom::perf
