#include "loom/perf/collective_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loom/core/error.h"

namespace loom::perf {
namespace {

LinkSpec link(double gbs, double us) {
  return {"l", "test", gbs, us, 1.0, "test"};
}

TEST(Collectives, RingOnOneNodeIsTheTextbookFormula) {
  Topology t{1, 4, link(10, 5), link(1, 50)};
  double S = 100e6;
  // 2(n-1) alpha + 2(n-1)/n S / B
  EXPECT_NEAR(allreduce_seconds(Algorithm::kRing, t, S), 6 * 5e-6 + 1.5 * S / 10e9, 1e-12);
  EXPECT_EQ(allreduce_seconds(Algorithm::kRing, Topology{1, 1, link(10, 5), link(1, 5)}, S), 0);
}

TEST(Collectives, FlatRingAcrossNodesRunsAtTheSlowerLink) {
  Topology t{2, 2, link(10, 5), link(1, 50)};
  double S = 100e6;
  EXPECT_NEAR(allreduce_seconds(Algorithm::kRing, t, S), 6 * 50e-6 + 1.5 * S / 1e9, 1e-12);
}

TEST(Collectives, TwoLevelMovesTheSameBytesOverTheNicButFewerSlowSteps) {
  Topology t{4, 4, link(10, 5), link(1, 50)};
  double S = 64e6;
  double rs = 3 * 5e-6 + 0.75 * S / 10e9;
  double inter = 2 * 3 * 50e-6 + 2 * 0.75 * S / 1e9;
  EXPECT_NEAR(allreduce_seconds(Algorithm::kTwoLevel, t, S), 2 * rs + inter, 1e-12);
  EXPECT_LT(allreduce_seconds(Algorithm::kTwoLevel, t, 1e3),
            allreduce_seconds(Algorithm::kRing, t, 1e3));
}

TEST(Collectives, HalvingDoublingHasLogSteps) {
  Topology t{1, 8, link(10, 5), link(1, 50)};
  double S = 1e3;
  EXPECT_NEAR(allreduce_seconds(Algorithm::kHalvingDoubling, t, S),
              2 * 3 * 5e-6 + 2 * 7.0 / 8 * (S / 1) / 10e9, 1e-12);
}

TEST(Collectives, ParameterServerIsBoundByServersOrWorkerNics) {
  Topology t{8, 1, link(10, 5), link(1, 10)};
  double S = 1e9;
  t.servers = 1;  // 8 pushes into one server NIC
  EXPECT_NEAR(allreduce_seconds(Algorithm::kParameterServer, t, S), 2 * 10e-6 + 8.0, 1e-9);
  t.servers = 8;
  EXPECT_NEAR(allreduce_seconds(Algorithm::kParameterServer, t, S), 2 * 10e-6 + 1.0, 1e-9);
  EXPECT_THROW(algorithm_from_name("tree"), InputError);
}

}  // namespace
}  // namespace loom::perf
