// The parameter server through the whole training loop (loom::train::run_training) on
// Fashion-MNIST: the same model as the allreduce strategy, staleness, placements, bad keys.
#include <gtest/gtest.h>

#include <cmath>

#include "common/tiny_run.h"
#include "loom/core/error.h"
#include "loom/train/trainer.h"

namespace loom::sync {
namespace {

using loom::testing::max_abs_diff;
using loom::testing::tiny_run;
Config ps_run(int workers, int servers, int batch, int steps) {
  Config cfg = tiny_run(workers, batch, steps);
  cfg.set("sync", std::string("ps"));
  cfg.set("ps.servers", int64_t(servers));
  cfg.set("sync.bucket_kib", int64_t(64));  // 3 buckets, so pieces cross shard boundaries
  return cfg;
}

TEST(PsTraining, SynchronousPsMatchesAllreduce) {
  std::vector<std::vector<float>> by_workers;
  for (int workers : {1, 2, 3}) {
    Config ar = tiny_run(workers, 24, 12);
    ar.set("sync.bucket_kib", int64_t(64));
    const train::TrainResult reference = train::run_training(plan::read_run_plan(ar));
    by_workers.push_back(reference.final_params);
    for (int servers : {1, 2}) {
      if (workers == 1 && servers == 2) continue;  // the strategy tests cover it
      const train::TrainResult ps =
          train::run_training(plan::read_run_plan(ps_run(workers, servers, 24, 12)));
      ASSERT_EQ(ps.steps, 12);
      // The same mean gradients and optimizer steps; only the order of fp32 additions differs
      // (servers sum workers in rank order, the ring in its own).
      EXPECT_LT(max_abs_diff(ps.final_params, reference.final_params), 1e-5)
          << workers << " workers, " << servers << " servers";
    }
  }
  // The tolerance means something: a global batch of 24 instead of 72 lands far away.
  EXPECT_GT(max_abs_diff(by_workers[0], by_workers[2]), 1e-2);
}

TEST(PsTraining, StalenessZeroIsSynchronousAndPlacementsAgreeBitwise) {
  Config k0 = ps_run(2, 1, 24, 10);
  k0.set("ps.staleness", int64_t(0));
  const train::TrainResult sync = train::run_training(plan::read_run_plan(k0));
  // Dedicated server ranks on the thread transport: 2 workers + 1 server = a world of 3;
  // staleness left at its default (0).
  Config ranks = ps_run(3, 1, 24, 10);
  ranks.set("ps.placement", std::string("ranks"));
  const train::TrainResult r = train::run_training(plan::read_run_plan(ranks));
  EXPECT_EQ(r.world, 2);
  EXPECT_EQ(r.final_params, sync.final_params);
  // With ps.exact_delay, staleness is timing-independent too.
  Config stale = ps_run(2, 1, 24, 10);
  stale.set("ps.staleness", int64_t(2));
  stale.set("ps.exact_delay", true);
  Config stale_ranks = stale;
  stale_ranks.set("workers", int64_t(3));
  stale_ranks.set("ps.placement", std::string("ranks"));
  const train::TrainResult a = train::run_training(plan::read_run_plan(stale));
  EXPECT_EQ(a.final_params, train::run_training(plan::read_run_plan(stale_ranks)).final_params);
  EXPECT_GT(max_abs_diff(a.final_params, sync.final_params), 1e-5);
}

TEST(PsTraining, StalenessTwoStillTrains) {
  Config cfg = ps_run(2, 2, 32, 200);
  cfg.set("ps.staleness", int64_t(2));
  cfg.set("eval", true);
  cfg.set("mlp.dropout", 0.0);
  // Stale gradients act as extra momentum (Mitliagkas et al., 2016): with momentum 0.9 on
  // gradients two steps old this small fast model oscillates; 0.5 trains.
  cfg.set("optim.momentum", 0.5);
  const train::TrainResult r = train::run_training(plan::read_run_plan(cfg));
  ASSERT_EQ(r.epochs.size(), 1u);
  // Untrained loss is ln(10) = 2.30.
  EXPECT_LT(r.epochs[0].train_loss, 1.3);
  EXPECT_GT(r.test_acc, 0.70);
  EXPECT_EQ(r.epochs[0].bytes_sent, 200 * int64_t(r.final_params.size()) * 4);
}

}  // namespace
}  // namespace loom::sync
