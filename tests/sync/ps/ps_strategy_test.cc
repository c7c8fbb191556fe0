// The parameter-server strategy driven step by step on a tiny model, workers as threads:
// against a scalar reference of (stale) synchronous SGD, the staleness bound under a slow
// worker, byte counts, and lost peers.
#include "loom/sync/ps/ps_strategy.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>

#include "common/tiny_run.h"
#include "loom/comm/thread/thread_world.h"
#include "loom/core/error.h"
#include "loom/core/rng.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/optim/optimizer.h"
#include "loom/plan/model_reader.h"
#include "loom/plan/optim_reader.h"
#include "loom/plan/strategy_factory.h"
#include "loom/plan/sync_reader.h"
#include "loom/sync/ps/ps_placement.h"
#include "loom/tensor/backend_registry.h"
#include "loom/train/trainer.h"

namespace loom::sync {
namespace {

using loom::testing::max_abs_diff;

constexpr int64_t kFeatures = 8, kClasses = 4, kBatch = 6;
constexpr float kLr = 0.1f;

Config tiny_config(int servers, int staleness) {
  Config cfg;
  cfg.set("sync", std::string("ps"));
  cfg.set("ps.servers", int64_t(servers));
  cfg.set("ps.staleness", int64_t(staleness));
  cfg.set_override("mlp.hidden=[16, 8]");
  cfg.set("mlp.dropout", 0.0);
  cfg.set("optim.momentum", 0.9);
  cfg.set("sync.bucket_kib", int64_t(1));  // 2 buckets of the 316 parameters
  return cfg;
}

// Worker w's batch of step t: distinct, seeded values, so a mixed-up batch cannot hide.
struct Batch {
  std::vector<float> x;
  std::vector<int32_t> y;
};
Batch batch_of(int64_t t, int w) {
  Batch b;
  Rng rng(1234, uint64_t(w), RngPurpose::kTest, uint64_t(t));
  for (int64_t i = 0; i < kBatch * kFeatures; ++i) b.x.push_back(float(rng.uniform()) * 2 - 1);
  // A learnable rule: the class is the quadrant of the first two features.
  for (int64_t i = 0; i < kBatch; ++i)
    b.y.push_back(
        int32_t(2 * (b.x[size_t(i * kFeatures)] > 0) + (b.x[size_t(i * kFeatures + 1)] > 0)));
  return b;
}

std::unique_ptr<nn::Model> tiny_model(const Config& cfg) {
  auto m = nn::build_model(plan::read_model_spec(cfg), cpu_backend(), nn::Shape{kFeatures},
                           int(kClasses));
  m->init_params(7);
  return m;
}

double loss_and_grads(nn::Model& m, int64_t t, int w, float scale,
                      const std::function<void(const nn::ParamRange&)>& on_ready = nullptr) {
  const Batch b = batch_of(t, w);
  nn::StepInfo info;
  m.forward(b.x.data(), kBatch, info);
  const double loss = m.loss(b.y.data(), scale).loss_sum;
  m.backward(on_ready);
  return loss;
}

// Stale synchronous SGD by the definition: step t's gradients, averaged over the workers,
// are computed on version v = max(0, t - k) and applied to version t. With ps.lookahead (the
// default) they are computed on x_v + (mu + ... + mu^(t-v)) (x_v - x_{v-1}) once v >= 1, and
// with ps.stale_lr = "divide" the servers' learning rate is lr / k.
std::vector<float> reference(const Config& cfg, int workers, int staleness, int64_t steps,
                             float lr = kLr) {
  auto m = tiny_model(cfg);
  const size_t n = size_t(m->num_params());
  auto opt =
      optim::make_optimizer(plan::read_optimizer_options(cfg), cpu_backend(), m->num_params());
  const bool lookahead = staleness > 0 && cfg.get_bool("ps.lookahead", true);
  if (staleness > 0 && cfg.get_string("ps.stale_lr", "none") == "divide")
    lr = float(double(lr) / staleness);
  const float mu = float(cfg.get_double("optim.momentum", 0.9));
  std::vector<std::vector<float>> versions{std::vector<float>(m->params(), m->params() + n)};
  for (int64_t t = 0; t < steps; ++t) {
    const int64_t v = std::max<int64_t>(0, t - staleness);
    const auto& stale = versions[size_t(v)];
    std::copy(stale.begin(), stale.end(), m->params());
    if (lookahead && v >= 1 && t > v) {
      float gain = 0, p = 1;
      for (int64_t j = 0; j < t - v; ++j) gain += (p *= mu);
      const auto& before = versions[size_t(v - 1)];
      for (size_t i = 0; i < n; ++i) m->params()[i] = stale[i] + gain * (stale[i] - before[i]);
    }
    std::vector<float> sum(n, 0.0f);
    for (int w = 0; w < workers; ++w) {
      loss_and_grads(*m, t, w, 1.0f / float(kBatch * workers));
      for (size_t i = 0; i < n; ++i) sum[i] += m->grads()[i];
    }
    std::vector<float> next = versions.back();
    opt->step(next.data(), sum.data(), int64_t(n), lr);
    versions.push_back(std::move(next));
  }
  return versions.back();
}

struct RunOut {
  std::vector<std::vector<float>> params;  // by worker
  int64_t max_lead = -1;
  SyncStats stats;
};

// Holds the slow worker after each of its steps t until every other worker has begun step
// t + 1 + k (k = ps.staleness), as far ahead as the bound lets them run: the slowest worker the
// bound allows for, whatever the scheduler does.
class SlowWorkerGate {
 public:
  SlowWorkerGate(int workers, int64_t staleness, int64_t steps)
      : begun_(size_t(workers), -1), k_(staleness), steps_(steps) {}
  void began(int rank, int64_t step) { set(rank, step); }
  // A worker that leaves (done or failed) holds nobody back.
  void left(int rank) { set(rank, INT64_MAX); }
  void after_step(int slow, int64_t t) {
    const int64_t target = t + 1 + k_;
    if (target >= steps_) return;
    std::unique_lock<std::mutex> lock(mu_);
    auto ahead = [&] {
      for (size_t w = 0; w < begun_.size(); ++w)
        if (int(w) != slow && begun_[w] < target) return false;
      return true;
    };
    // The deadline only turns a bound that is too tight (the others wait for this worker)
    // into a failure instead of a hang; nothing is measured against it.
    if (!cv_.wait_for(lock, std::chrono::seconds(60), ahead))
      ADD_FAILURE() << "the other workers never began step " << target << " while worker " << slow
                    << " was after step " << t;
  }

 private:
  void set(int rank, int64_t step) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      begun_[size_t(rank)] = step;
    }
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int64_t> begun_;
  const int64_t k_, steps_;
};

// Every worker runs `steps` steps; `slow` (if >= 0) is held by a SlowWorkerGate.
RunOut run_ps(const Config& cfg, int workers, int64_t steps, int slow = -1, float lr = kLr) {
  RunOut out;
  out.params.resize(size_t(workers));
  std::mutex mu;
  SlowWorkerGate gate(workers, cfg.get_int("ps.staleness", 0), steps);
  comm::ThreadWorld world(workers);
  world.run([&](comm::Communicator& c) {
    struct Leave {
      SlowWorkerGate& gate;
      int rank;
      ~Leave() { gate.left(rank); }
    } leave{gate, c.rank()};
    auto m = tiny_model(cfg);
    auto opt =
        optim::make_optimizer(plan::read_optimizer_options(cfg), cpu_backend(), m->num_params());
    auto strategy = plan::make_strategy(cfg, c, *m, *opt);
    auto& ps = dynamic_cast<PsStrategy&>(*strategy);
    strategy->start();
    for (int64_t t = 0; t < steps; ++t) {
      strategy->begin_step(t, lr);
      gate.began(c.rank(), t);
      loss_and_grads(*m, t, c.rank(), strategy->grad_scale(kBatch),
                     [&](const nn::ParamRange& r) { strategy->on_gradients_ready(r); });
      strategy->end_step();
      if (c.rank() == slow) gate.after_step(slow, t);
    }
    strategy->finish();
    std::lock_guard<std::mutex> lock(mu);
    out.params[size_t(c.rank())].assign(m->params(), m->params() + m->num_params());
    out.max_lead = std::max(out.max_lead, ps.max_lead());
    if (c.rank() == 0) out.stats = strategy->take_stats();
  });
  return out;
}

TEST(PsStrategy, SynchronousMatchesTheReference) {
  for (int workers : {1, 2, 3}) {
    for (int servers : {1, 2, 3}) {
      const Config cfg = tiny_config(servers, 0);
      const RunOut out = run_ps(cfg, workers, 12);
      const std::vector<float> ref = reference(cfg, workers, 0, 12);
      for (int w = 0; w < workers; ++w)
        EXPECT_LT(max_abs_diff(out.params[size_t(w)], ref), 1e-5)
            << workers << " workers, " << servers << " servers, worker " << w;
      EXPECT_EQ(out.max_lead, 0);
    }
  }
}

TEST(PsStrategy, StaleRunsMatchDelayedSgd) {
  // ps.exact_delay: two workers, staleness 1 and 2, one worker slow: the result does not
  // depend on timing.
  // Each correction on and off: the lookahead and the divided learning rate are exactly
  // the ones the reference defines.
  struct Corrections {
    bool lookahead;
    const char* stale_lr;
  };
  for (int k : {1, 2}) {
    for (const Corrections& corr :
         {Corrections{true, "divide"}, Corrections{false, "none"}, Corrections{true, "none"}}) {
      Config cfg = tiny_config(2, k);
      cfg.set("ps.exact_delay", true);
      cfg.set("ps.lookahead", corr.lookahead);
      cfg.set("ps.stale_lr", std::string(corr.stale_lr));
      const std::vector<float> ref = reference(cfg, 2, k, 15);
      const RunOut out = run_ps(cfg, 2, 15, /*slow=*/1);
      for (int w = 0; w < 2; ++w)
        EXPECT_LT(max_abs_diff(out.params[size_t(w)], ref), 1e-5)
            << "staleness " << k << " lookahead " << corr.lookahead << " " << corr.stale_lr;
      // And it is not synchronous SGD: staleness changes the trajectory.
      EXPECT_GT(max_abs_diff(ref, reference(cfg, 2, 0, 15)), 1e-4);
    }
    // The lookahead changes what the gradients are computed on.
    Config look = tiny_config(2, k), plain = tiny_config(2, k);
    plain.set("ps.lookahead", false);
    EXPECT_GT(max_abs_diff(reference(look, 2, k, 15), reference(plain, 2, k, 15)), 1e-5) << k;
  }
}

TEST(PsStrategy, NoWorkerRunsMoreThanStalenessAhead) {
  for (int k : {0, 1, 2, 3}) {
    const RunOut out = run_ps(tiny_config(1, k), 3, 30, /*slow=*/2);
    // The bound holds, and the fast workers do run ahead as far as it allows.
    EXPECT_EQ(out.max_lead, k) << "staleness " << k;
  }
}

TEST(PsStrategy, ReportsBytesPushedAndPulled) {
  const Config cfg = tiny_config(2, 0);
  const RunOut out = run_ps(cfg, 2, 5);
  const int64_t n = tiny_model(cfg)->num_params();
  EXPECT_EQ(out.stats.bytes_sent, 5 * n * 4);
  EXPECT_EQ(out.stats.bytes_received, 5 * n * 4);
}

// Mean loss per sample on 50 batches no step trained on.
double held_out_loss(const Config& cfg, const std::vector<float>* params) {
  auto m = tiny_model(cfg);
  if (params) std::copy(params->begin(), params->end(), m->params());
  double sum = 0;
  for (int64_t t = 0; t < 50; ++t) sum += loss_and_grads(*m, 100000 + t, 0, 1.0f);
  return sum / double(50 * kBatch);
}

TEST(PsStrategy, StaleTrainingStillLowersTheLoss) {
  // Momentum 0.9 on gradients two steps old: at the synchronous lr (0.1) the plain stale
  // run barely learns this tiny model in 150 steps; with both corrections (lookahead,
  // lr / k) it does. Untrained: ~ln 4.
  Config cfg = tiny_config(2, 2);
  cfg.set("ps.exact_delay", true);  // always two steps old: the worst case, timing-independent
  cfg.set("ps.stale_lr", std::string("divide"));  // a constant lr: both corrections
  const double untrained = held_out_loss(cfg, nullptr);
  const RunOut out = run_ps(cfg, 2, 150, /*slow=*/1);
  const double corrected = held_out_loss(cfg, &out.params[0]);
  EXPECT_LT(corrected, 0.7 * untrained);  // 0.845 of 1.395
  cfg.set("ps.lookahead", false);
  cfg.set("ps.stale_lr", std::string("none"));
  const RunOut plain = run_ps(cfg, 2, 150, /*slow=*/1);
  const double uncorrected = held_out_loss(cfg, &plain.params[0]);
  std::printf("held-out loss: untrained %.3f, stale corrected %.3f, stale plain %.3f\n", untrained,
              corrected, uncorrected);
  EXPECT_LT(corrected, 0.8 * uncorrected);  // 0.845 vs 1.259
}

TEST(PsStrategy, ALostWorkerFailsTheOthersFast) {
  // Fast: the others learn of the failure from worker 1's abort of the servers' world. Waiting
  // out the 20 s timeout instead would end in a "stopped answering" error.
  Config cfg = tiny_config(1, 1);
  cfg.set("comm.timeout_s", 20.0);
  comm::ThreadWorld world(3, comm::CommOptions{20.0});
  std::mutex mu;
  std::vector<std::string> messages(3);
  try {
    world.run([&](comm::Communicator& c) {
      try {
        auto m = tiny_model(cfg);
        auto opt = optim::make_optimizer(plan::read_optimizer_options(cfg), cpu_backend(),
                                         m->num_params());
        auto strategy = plan::make_strategy(cfg, c, *m, *opt);
        strategy->start();
        for (int64_t t = 0; t < 50; ++t) {
          if (c.rank() == 1 && t == 5) throw std::runtime_error("worker 1 crashed");
          strategy->begin_step(t, kLr);
          loss_and_grads(*m, t, c.rank(), strategy->grad_scale(kBatch),
                         [&](const nn::ParamRange& r) { strategy->on_gradients_ready(r); });
          strategy->end_step();
        }
        strategy->finish();
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        messages[size_t(c.rank())] = e.what();
        throw;
      }
    });
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("worker 1"), std::string::npos) << e.what();
  }
  for (int r : {0, 2}) {
    EXPECT_NE(messages[size_t(r)].find("worker 1 stopped before the end of training"),
              std::string::npos)
        << "rank " << r << ": " << messages[size_t(r)];
    EXPECT_EQ(messages[size_t(r)].find("stopped answering"), std::string::npos)
        << "rank " << r << ": " << messages[size_t(r)];
  }
}

TEST(PsStrategy, ASilentServerRankIsNamedAfterTheTimeout) {
  // Placement "ranks" over the thread transport: 2 workers, rank 2 should serve but never does.
  Config cfg = tiny_config(1, 0);
  cfg.set("ps.placement", std::string("ranks"));
  comm::ThreadWorld world(3, comm::CommOptions{0.5});
  std::atomic<bool> release{false};
  try {
    world.run([&](comm::Communicator& c) {
      if (ps_server_rank(plan::read_ps_options(cfg), c)) {
        release.wait(false);
        return;
      }
      auto trainers = ps_training_comm(plan::read_ps_options(cfg), c);
      auto m = tiny_model(cfg);
      auto opt =
          optim::make_optimizer(plan::read_optimizer_options(cfg), cpu_backend(), m->num_params());
      auto strategy = plan::make_strategy(cfg, *trainers, *m, *opt);
      try {
        strategy->start();
      } catch (...) {
        release.store(true);
        release.notify_all();
        throw;
      }
    });
    FAIL() << "no error";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2"), std::string::npos) << e.what();
  }
}

TEST(PsStrategy, RanksPlacementMatchesThreadsBitForBit) {
  Config cfg = tiny_config(2, 1);
  cfg.set("ps.exact_delay", true);
  const RunOut threads = run_ps(cfg, 2, 10);
  cfg.set("ps.placement", std::string("ranks"));
  std::vector<float> ranks;
  comm::ThreadWorld world(4);  // 2 workers + 2 servers
  world.run([&](comm::Communicator& c) {
    if (ps_server_rank(plan::read_ps_options(cfg), c))
      return run_ps_server(plan::read_ps_options(cfg), c);
    auto trainers = ps_training_comm(plan::read_ps_options(cfg), c);
    EXPECT_EQ(trainers->size(), 2);
    auto m = tiny_model(cfg);
    auto opt =
        optim::make_optimizer(plan::read_optimizer_options(cfg), cpu_backend(), m->num_params());
    auto strategy = plan::make_strategy(cfg, *trainers, *m, *opt);
    strategy->start();
    for (int64_t t = 0; t < 10; ++t) {
      strategy->begin_step(t, kLr);
      loss_and_grads(*m, t, c.rank(), strategy->grad_scale(kBatch),
                     [&](const nn::ParamRange& r) { strategy->on_gradients_ready(r); });
      strategy->end_step();
    }
    strategy->finish();
    // The training ranks' own collectives still work around the servers.
    float one = 1;
    trainers->allreduce(std::span<float>(&one, 1));
    EXPECT_EQ(one, 2.0f);
    if (c.rank() == 0) ranks.assign(m->params(), m->params() + m->num_params());
  });
  EXPECT_EQ(ranks, threads.params[0]);
}

std::string strategy_error(const Config& cfg, int world_size = 1) {
  try {
    comm::ThreadWorld world(world_size);
    world.run([&](comm::Communicator& c) {
      if (plan::ps_on_ranks(cfg)) {
        if (ps_server_rank(plan::read_ps_options(cfg), c))
          return run_ps_server(plan::read_ps_options(cfg), c);
        auto trainers = ps_training_comm(plan::read_ps_options(cfg), c);
      }
      auto m = tiny_model(cfg);
      auto opt =
          optim::make_optimizer(plan::read_optimizer_options(cfg), cpu_backend(), m->num_params());
      plan::make_strategy(cfg, c, *m, *opt);
    });
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

TEST(PsStrategy, BadKeysAreRejectedByName) {
  Config zero = tiny_config(1, 0);
  zero.set("ps.servers", int64_t(0));
  EXPECT_NE(strategy_error(zero).find("ps.servers"), std::string::npos) << strategy_error(zero);
  Config negative = tiny_config(1, -1);
  EXPECT_NE(strategy_error(negative).find("ps.staleness"), std::string::npos);
  Config where = tiny_config(1, 0);
  where.set("ps.placement", std::string("gpu"));
  EXPECT_NE(strategy_error(where).find("ps.placement"), std::string::npos);
  Config lr = tiny_config(1, 2);
  lr.set("ps.stale_lr", std::string("halve"));
  EXPECT_NE(strategy_error(lr).find("ps.stale_lr"), std::string::npos) << strategy_error(lr);
  // 316 parameters cannot make 400 non-empty shards.
  const std::string many = strategy_error(tiny_config(400, 0));
  EXPECT_NE(many.find("ps.servers = 400"), std::string::npos) << many;
  // Dedicated server ranks must leave a rank to train.
  Config ranks = tiny_config(2, 0);
  ranks.set("ps.placement", std::string("ranks"));
  EXPECT_NE(strategy_error(ranks, 2).find("ps.servers"), std::string::npos)
      << strategy_error(ranks, 2);
  // An unknown key is the training loop's to reject; it names the key.
  Config typo = tiny_config(1, 0);
  typo.set("ps.server", int64_t(2));
  try {
    train::run_training(plan::read_run_plan(typo));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("ps.server"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom::sync
