// Block momentum (BMUF): the special cases whose algebra is known in closed form, training
// with momentum and codecs, and the partial last block.
#include "loom/sync/bmuf_strategy.h"

#include <gtest/gtest.h>

#include "tiny_training.h"

namespace loom::sync {
namespace {

using testing::max_abs_diff;
using testing::run_tiny;
using testing::tiny_config;

Config bmuf(int64_t tau, double eta, bool reset = true) {
  Config cfg = tiny_config();
  cfg.set("sync", std::string("bmuf"));
  cfg.set("bmuf.tau", tau);
  if (eta >= 0) cfg.set("bmuf.eta", eta);
  cfg.set("bmuf.reset_momentum", reset);
  return cfg;
}

TEST(Bmuf, TauOneNoMomentumIsSynchronousSgd) {
  // tau = 1, eta = 0, zeta = 1: V = G = W_prev - mean_i(W_prev - lr g_i) = lr mean_i g_i, so
  // W = W_prev - lr mean_i g_i: one synchronous SGD step on the global batch.
  for (int workers : {2, 4}) {
    const testing::TinyRun sync_sgd = run_tiny(tiny_config(), workers, 40, 8);
    const testing::TinyRun b = run_tiny(bmuf(1, 0.0), workers, 40, 8);
    EXPECT_LT(max_abs_diff(sync_sgd.final_params, b.final_params), 2e-5) << workers;
    EXPECT_GT(max_abs_diff(sync_sgd.init_params, b.final_params), 1e-2);
    EXPECT_TRUE(b.replicas_equal);
  }
}

TEST(Bmuf, OneWorkerWithoutBlockMomentumIsLocalSgd) {
  // N = 1, eta = 0: W = W_prev - (W_prev - W_1) = W_1. With local momentum kept across
  // blocks this is plain SGD with momentum; 23 steps with tau = 5 ends in a partial block.
  Config local = tiny_config();
  local.set("optim.momentum", 0.9);
  Config b = bmuf(5, -1, /*reset=*/false);  // default eta = 1 - 1/1 = 0
  b.set("optim.momentum", 0.9);
  const testing::TinyRun plain = run_tiny(local, 1, 23, 16);
  const testing::TinyRun block = run_tiny(b, 1, 23, 16);
  EXPECT_LT(max_abs_diff(plain.final_params, block.final_params), 1e-5);
  EXPECT_NE(block.describe.find("eta = 0"), std::string::npos) << block.describe;
}

TEST(Bmuf, BlockMomentumStepByHand) {
  // One worker, one block of tau = 6 steps from W0 to W1 (local SGD), eta = 0.5, zeta = 0.8:
  // G = W0 - W1, V = (1 - eta) zeta G = 0.4 G, W = W0 - V, Nesterov start W - eta V:
  // W0 - 0.6 G; classic momentum: W0 - 0.4 G.
  const testing::TinyRun local = run_tiny(tiny_config(), 1, 6, 16);
  for (bool nesterov : {true, false}) {
    Config cfg = bmuf(6, 0.5);
    cfg.set("bmuf.zeta", 0.8);
    cfg.set("bmuf.nesterov", nesterov);
    const testing::TinyRun b = run_tiny(cfg, 1, 6, 16);
    const double k = nesterov ? 0.6 : 0.4;
    std::vector<float> expect(local.init_params.size());
    for (size_t i = 0; i < expect.size(); ++i) {
      const double g = double(local.init_params[i]) - double(local.final_params[i]);
      expect[i] = float(double(local.init_params[i]) - k * g);
    }
    EXPECT_LT(max_abs_diff(expect, b.final_params), 1e-6) << "nesterov " << nesterov;
  }
}

TEST(Bmuf, TrainsWithDefaultsAndCodecs) {
  const testing::TinyRun fp32 = run_tiny(tiny_config(), 2, 240, 16);
  for (const char* codec : {"fp32", "onebit", "int8"}) {
    Config cfg = bmuf(8, -1);
    cfg.set("optim.momentum", 0.9);
    cfg.set("optim.lr", 0.05);
    cfg.set("codec", std::string(codec));
    const testing::TinyRun r = run_tiny(cfg, 2, 240, 16);
    EXPECT_TRUE(r.replicas_equal) << codec;
    EXPECT_LT(r.mean_loss(200, 240), 1.3 * fp32.mean_loss(200, 240)) << codec;
    // 30 blocks of 8; bytes only at block ends.
    EXPECT_GT(r.stats.bytes_sent, 0);
    EXPECT_NE(r.describe.find("eta = 0.5"), std::string::npos) << r.describe;
  }
}

TEST(Bmuf, FinishFoldsInThePartialBlock) {
  // 10 steps with tau = 4: blocks end at 4 and 8, finish() syncs steps 9-10. Without the
  // fold the replicas would differ (each ran its own local steps).
  const testing::TinyRun r = run_tiny(bmuf(4, -1), 2, 10, 16);
  EXPECT_TRUE(r.replicas_equal);
}

}  // namespace
}  // namespace loom::sync
