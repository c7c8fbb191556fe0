// Model parallelism (src/loom/sync/model_parallel_*.h, parallel_*.h): the split layers and
// whole model-parallel / hybrid models against the single-worker model, 1..4 workers, uneven
// widths; 8-bit activations stay close; bad layouts are refused naming the layer.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

#include "loom/comm/thread/thread_world.h"
#include "loom/core/error.h"
#include "loom/core/rng.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/nn/layers/activation.h"
#include "loom/nn/layers/conv2d.h"
#include "loom/nn/layers/linear.h"
#include "loom/optim/optimizer.h"
#include "loom/plan/optim_reader.h"
#include "loom/plan/strategy_factory.h"
#include "loom/plan/sync_reader.h"
#include "loom/sync/model_parallel/model_parallel_block.h"
#include "loom/sync/model_parallel/model_parallel_model.h"
#include "loom/sync/model_parallel/model_parallel_strategy.h"
#include "loom/sync/model_parallel/parallel_linear.h"
#include "loom/tensor/backend_registry.h"

namespace loom::sync {
namespace {

std::vector<float> randoms(size_t n, uint64_t seed, float scale = 1.0f) {
  Rng rng(seed, 0, RngPurpose::kTest);
  std::vector<float> v(n);
  for (auto& x : v) x = scale * rng.normal();
  return v;
}

double max_diff(const float* a, const float* b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

nn::Context cpu_ctx() {
  nn::Context ctx;
  ctx.backend = &cpu_backend();
  ctx.training = true;
  return ctx;
}

// The single-worker Linear's forward and gradients for x, dy.
struct LinearRef {
  std::vector<float> params, grads, y, dx;
};
LinearRef linear_ref(int64_t in, int64_t out, const std::vector<float>& x,
                     const std::vector<float>& dy, int64_t rows, uint64_t seed) {
  nn::Linear l(in, out);
  l.build({in});
  LinearRef r;
  r.params.resize(size_t(l.num_params()));
  r.grads.resize(r.params.size());
  l.bind(r.params.data(), r.grads.data());
  Rng rng(seed, 0, RngPurpose::kInit, 0);
  l.init_params(rng, cpu_backend());
  r.y.resize(size_t(rows * out));
  r.dx.resize(size_t(rows * in));
  const nn::Context ctx = cpu_ctx();
  l.forward(ctx, x.data(), r.y.data(), rows);
  l.backward(ctx, x.data(), r.y.data(), dy.data(), r.dx.data(), rows);
  return r;
}

// ---- the layers ----

TEST(ParallelLinear, ColumnGatheredEqualsLinear) {
  const int64_t in = 7, out = 10, rows = 5;  // 10 over 3 or 4 workers: uneven
  const auto x = randoms(size_t(rows * in), 1), dy = randoms(size_t(rows * out), 2);
  const LinearRef ref = linear_ref(in, out, x, dy, rows, 9);
  for (int n = 1; n <= 4; ++n) {
    comm::ThreadWorld world(n);
    world.run([&](comm::Communicator& c) {
      ActivationExchange ex(c, nullptr);
      ColumnParallelLinear l(in, out, ex, /*gather_output=*/true, /*reduce_input_grad=*/true,
                             "test");
      EXPECT_EQ(l.build({in}), nn::Shape{out});
      std::vector<float> p(size_t(l.num_params())), g(p.size()), y(size_t(rows * out)),
          dx(size_t(rows * in));
      l.bind(p.data(), g.data());
      Rng rng(9, 0, RngPurpose::kInit, 0);
      l.init_params(rng, cpu_backend());
      const nn::Context ctx = cpu_ctx();
      l.forward(ctx, x.data(), y.data(), rows);
      l.backward(ctx, x.data(), y.data(), dy.data(), dx.data(), rows);
      EXPECT_LT(max_diff(y.data(), ref.y.data(), y.size()), 1e-5) << n << " workers";
      EXPECT_LT(max_diff(dx.data(), ref.dx.data(), dx.size()), 1e-5) << n << " workers";
      // My rows of W and entries of b, values and gradients.
      const int64_t c0 = l.first_col(), k = l.local_cols();
      EXPECT_EQ(k, int64_t(comm::block_range(size_t(out), n, c.rank()).size()));
      EXPECT_EQ(max_diff(p.data(), ref.params.data() + c0 * in, size_t(k * in)), 0.0);
      EXPECT_LT(max_diff(g.data(), ref.grads.data() + c0 * in, size_t(k * in)), 1e-5);
      EXPECT_LT(max_diff(g.data() + k * in, ref.grads.data() + in * out + c0, size_t(k)), 1e-5);
    });
  }
}

TEST(ParallelLinear, ColumnThenRowPairEqualsTwoLinears) {
  // Linear(6 -> 9) -> ReLU -> Linear(9 -> 4): 9 hidden over 2..4 workers is uneven.
  const int64_t in = 6, hid = 9, out = 4, rows = 3;
  const auto x = randoms(size_t(rows * in), 3), dy = randoms(size_t(rows * out), 4);
  // Reference by hand: two Linears and a ReLU.
  nn::Linear l1(in, hid), l2(hid, out);
  nn::ReLU relu;
  l1.build({in});
  relu.build({hid});
  l2.build({hid});
  std::vector<float> p1(size_t(l1.num_params())), g1(p1.size()), p2(size_t(l2.num_params())),
      g2(p2.size());
  l1.bind(p1.data(), g1.data());
  l2.bind(p2.data(), g2.data());
  Rng r1(5, 0, RngPurpose::kInit, 1), r2(5, 0, RngPurpose::kInit, 2);
  l1.init_params(r1, cpu_backend());
  l2.init_params(r2, cpu_backend());
  const nn::Context ctx = cpu_ctx();
  std::vector<float> h(size_t(rows * hid)), a(h.size()), y(size_t(rows * out)), da(h.size()),
      dh(h.size()), dx(size_t(rows * in));
  l1.forward(ctx, x.data(), h.data(), rows);
  relu.forward(ctx, h.data(), a.data(), rows);
  l2.forward(ctx, a.data(), y.data(), rows);
  l2.backward(ctx, a.data(), y.data(), dy.data(), da.data(), rows);
  relu.backward(ctx, h.data(), a.data(), da.data(), dh.data(), rows);
  l1.backward(ctx, x.data(), h.data(), dh.data(), dx.data(), rows);

  for (int n = 1; n <= 4; ++n) {
    comm::ThreadWorld world(n);
    world.run([&](comm::Communicator& c) {
      ActivationExchange ex(c, nullptr);
      ColumnParallelLinear col(in, hid, ex, false, true, "layer 1");
      RowParallelLinear row(hid, out, ex, "layer 2");
      nn::ReLU prelu;
      const int64_t k = col.local_cols(), c0 = col.first_col();
      EXPECT_EQ(col.build({in}), nn::Shape{k});
      prelu.build({k});
      EXPECT_EQ(row.build({k}), nn::Shape{out});
      std::vector<float> cp(size_t(col.num_params())), cg(cp.size()), rp(size_t(row.num_params())),
          rg(rp.size());
      col.bind(cp.data(), cg.data());
      row.bind(rp.data(), rg.data());
      Rng q1(5, 0, RngPurpose::kInit, 1), q2(5, 0, RngPurpose::kInit, 2);
      col.init_params(q1, cpu_backend());
      row.init_params(q2, cpu_backend());
      std::vector<float> sh(size_t(rows * k)), sa(sh.size()), sy(size_t(rows * out)),
          sda(sh.size()), sdh(sh.size()), sdx(size_t(rows * in));
      col.forward(ctx, x.data(), sh.data(), rows);
      prelu.forward(ctx, sh.data(), sa.data(), rows);
      row.forward(ctx, sa.data(), sy.data(), rows);
      row.backward(ctx, sa.data(), sy.data(), dy.data(), sda.data(), rows);
      prelu.backward(ctx, sh.data(), sa.data(), sda.data(), sdh.data(), rows);
      col.backward(ctx, x.data(), sh.data(), sdh.data(), sdx.data(), rows);
      EXPECT_LT(max_diff(sy.data(), y.data(), y.size()), 1e-5) << n;
      EXPECT_LT(max_diff(sdx.data(), dx.data(), dx.size()), 1e-5) << n;
      for (int64_t r = 0; r < rows; ++r)  // the shard is my columns of the hidden layer
        EXPECT_LT(max_diff(sh.data() + r * k, h.data() + r * hid + c0, size_t(k)), 1e-6);
      // Row layer: W[:, c0:c0+k] and its gradient, full bias gradient.
      for (int64_t o = 0; o < out; ++o) {
        EXPECT_EQ(rp[size_t(o * k)], p2[size_t(o * hid + c0)]);
        EXPECT_LT(max_diff(rg.data() + o * k, g2.data() + o * hid + c0, size_t(k)), 1e-5);
      }
      EXPECT_LT(max_diff(rg.data() + out * k, g2.data() + out * hid, size_t(out)), 1e-6);
      EXPECT_LT(max_diff(cg.data(), g1.data() + c0 * in, size_t(k * in)), 1e-5);
      // One allreduce each way: forward [rows, out] + backward [rows, in] floats.
      if (n > 1) {
        const int64_t fp32 = int64_t(sync::fp32_allreduce_wire_bytes(size_t(rows * out), n) +
                                     sync::fp32_allreduce_wire_bytes(size_t(rows * in), n));
        EXPECT_EQ(ex.take_bytes(), fp32);
      }
    });
  }
}

TEST(ParallelLinear, TooFewFeaturesIsRefusedNamingTheLayer) {
  comm::ThreadWorld world(4);
  world.run([&](comm::Communicator& c) {
    ActivationExchange ex(c, nullptr);
    // Every rank refuses (not only rank 3, which would hold none), so no rank is left
    // waiting in an exchange for one that gave up.
    try {
      ColumnParallelLinear l(5, 3, ex, true, true, "layer 7 Linear(5 -> 3)");
      ADD_FAILURE() << "rank " << c.rank() << ": 3 features over 4 workers were accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("layer 7 Linear(5 -> 3)"), std::string::npos);
      EXPECT_NE(std::string(e.what()).find("leave rank 3 none"), std::string::npos) << e.what();
    }
  });
}

// ---- whole models ----

constexpr int kFeatures = 12, kClasses = 5;

struct Data {
  std::vector<float> x;
  std::vector<int32_t> y;
};
const Data& data() {
  static const Data d = [] {
    Data r;
    r.x = randoms(size_t(512 * kFeatures), 11);
    Rng rng(12, 0, RngPurpose::kTest);
    for (int i = 0; i < 512; ++i) {
      int32_t label = 0;  // learnable: argmax of the first kClasses features
      for (int c = 1; c < kClasses; ++c)
        if (r.x[size_t(i * kFeatures + c)] > r.x[size_t(i * kFeatures + label)]) label = c;
      r.y.push_back(label);
    }
    return r;
  }();
  return d;
}

using LayersFn = std::function<std::vector<std::unique_ptr<nn::Layer>>()>;

struct RunResult {
  std::vector<double> loss;                // global mean per step
  std::vector<std::vector<float>> logits;  // per rank: eval logits of its rows after training
  std::vector<std::vector<float>> params;  // per rank
  std::vector<std::string> describe;
  int64_t bytes = 0;  // rank 0, all steps
  bool has_block = false;
};

// `steps` SGD steps over `workers` ranks, each with `batch` rows of the global batch, then an
// evaluation forward of 30 rows per rank.
RunResult run(const LayersFn& layers, const ParallelOptions& opts, int workers, int steps,
              int64_t batch, nn::Shape shape = {kFeatures}) {
  RunResult res;
  res.loss.assign(size_t(steps), 0.0);
  res.logits.resize(size_t(workers));
  res.params.resize(size_t(workers));
  res.describe.resize(size_t(workers));
  std::mutex mu;
  comm::ThreadWorld world(workers);
  world.run([&](comm::Communicator& c) {
    Backend& be = cpu_backend();
    be.set_intra_op_threads(1);
    auto model = build_parallel_model(layers(), opts, c, be, shape, kClasses, 3);
    model->init_params(3);
    Config cfg;
    cfg.set("optim.lr", 0.2);
    cfg.set("optim.momentum", 0.9);
    auto optimizer =
        optim::make_optimizer(plan::read_optimizer_options(cfg), be, model->num_params());
    auto strategy = plan::make_strategy(cfg, c, *model, *optimizer);
    strategy->start();
    const int64_t global = batch * workers;
    for (int s = 0; s < steps; ++s) {
      const int64_t first = (s * global + c.rank() * batch) % (512 - batch);
      nn::StepInfo info;
      info.dropout_key = derive_key(3, 0, RngPurpose::kDropout, uint64_t(s));
      info.sample_offset = first;
      strategy->begin_step(s, 0.2f);
      model->forward(data().x.data() + first * kFeatures, batch, info);
      const nn::LossResult r = model->loss(data().y.data() + first, strategy->grad_scale(batch));
      model->backward([&](const nn::ParamRange& rg) { strategy->on_gradients_ready(rg); });
      strategy->end_step();
      std::lock_guard<std::mutex> lock(mu);
      res.loss[size_t(s)] += r.loss_sum / double(global);
    }
    nn::StepInfo eval;
    eval.training = false;
    const int64_t rows = 30 + c.rank();  // uneven evaluation chunks
    const float* lg = model->forward(data().x.data() + 100 * c.rank() * kFeatures, rows, eval);
    const SyncStats st = strategy->take_stats();
    std::lock_guard<std::mutex> lock(mu);
    res.logits[size_t(c.rank())].assign(lg, lg + rows * kClasses);
    res.params[size_t(c.rank())].assign(model->params(), model->params() + model->num_params());
    res.describe[size_t(c.rank())] = strategy->describe();
    if (c.rank() == 0) res.bytes = st.bytes_sent;
    res.has_block = model_parallel_block_index(*model) >= 0;
  });
  return res;
}

// Single-worker logits for the evaluation rows run() gives rank r, after the same training:
// computed by a one-worker run over the global batch.
std::vector<float> reference_logits(const LayersFn& layers, int workers, int steps, int64_t batch,
                                    nn::Shape shape, std::vector<double>* loss) {
  // The global batch of step s is rows [s G, (s+1) G) mod (512 - batch) per rank slice, which
  // a single worker reproduces only when the slices are contiguous: keep s G + G <= 512 - b.
  RunResult single = run(layers, {}, 1, 0, 1, shape);
  (void)single;
  RunResult res;
  std::vector<float> all;
  comm::ThreadWorld world(1);
  world.run([&](comm::Communicator& c) {
    Backend& be = cpu_backend();
    auto model = build_parallel_model(layers(), {}, c, be, shape, kClasses, 3);
    model->init_params(3);
    Config cfg;
    cfg.set("optim.lr", 0.2);
    cfg.set("optim.momentum", 0.9);
    auto optimizer =
        optim::make_optimizer(plan::read_optimizer_options(cfg), be, model->num_params());
    const int64_t global = batch * workers;
    for (int s = 0; s < steps; ++s) {
      const int64_t first = s * global;
      nn::StepInfo info;
      info.dropout_key = derive_key(3, 0, RngPurpose::kDropout, uint64_t(s));
      info.sample_offset = first;
      model->forward(data().x.data() + first * kFeatures, global, info);
      const nn::LossResult r = model->loss(data().y.data() + first, 1.0f / float(global));
      model->backward();
      optimizer->step(model->params(), model->grads(), model->num_params(), 0.2f);
      loss->push_back(r.loss_sum / double(global));
    }
    nn::StepInfo eval;
    eval.training = false;
    for (int r = 0; r < workers; ++r) {
      const float* lg = model->forward(data().x.data() + 100 * r * kFeatures, 30 + r, eval);
      all.insert(all.end(), lg, lg + (30 + r) * kClasses);
    }
  });
  return all;
}

LayersFn mlp(std::vector<int64_t> hidden, float dropout) {
  return [=] {
    std::vector<std::unique_ptr<nn::Layer>> l;
    l.push_back(std::make_unique<nn::Flatten>());
    int64_t in = kFeatures;
    for (int64_t h : hidden) {
      l.push_back(std::make_unique<nn::Linear>(in, h));
      l.push_back(std::make_unique<nn::ReLU>());
      if (dropout > 0) l.push_back(std::make_unique<nn::Dropout>(dropout));
      in = h;
    }
    l.push_back(std::make_unique<nn::Linear>(in, kClasses));
    return l;
  };
}

void expect_matches_single(const LayersFn& layers, const ParallelOptions& opts, int workers,
                           double tol, nn::Shape shape = {kFeatures}) {
  const int steps = 6;
  const int64_t batch = 8;
  std::vector<double> ref_loss;
  const std::vector<float> ref = reference_logits(layers, workers, steps, batch, shape, &ref_loss);
  const RunResult mp = run(layers, opts, workers, steps, batch, shape);
  EXPECT_EQ(mp.has_block, workers > 1 && opts.mode != "data");
  for (int s = 0; s < steps; ++s)
    EXPECT_NEAR(mp.loss[size_t(s)], ref_loss[size_t(s)], tol) << "step " << s;
  size_t at = 0;
  for (int r = 0; r < workers; ++r) {
    const auto& lg = mp.logits[size_t(r)];
    EXPECT_LT(max_diff(lg.data(), ref.data() + at, lg.size()), 20 * tol) << "rank " << r;
    at += lg.size();
  }
  EXPECT_GT(std::fabs(ref_loss.front() - ref_loss.back()), 1e-3);  // it did train
}

TEST(ModelParallel, MlpEqualsSingleWorkerWithDropoutUnevenWidths) {
  ParallelOptions opts;
  opts.mode = "model";
  for (int n = 1; n <= 4; ++n) {
    SCOPED_TRACE(fmt::format("{} workers", n));
    // 12 -> 13 -> 7 -> 5: column, row, replicated; 13 and 7 split unevenly.
    expect_matches_single(mlp({13, 7}, 0.25f), opts, n, 2e-5);
  }
}

TEST(ModelParallel, ExplicitColumnRowColumnLayout) {
  ParallelOptions opts;
  opts.mode = "model";
  opts.linear = {"column", "row", "column"};  // the classifier split and gathered
  for (int n : {2, 3}) expect_matches_single(mlp({13, 7}, 0.0f), opts, n, 2e-5);
}

TEST(ModelParallel, OneWorkerIsThePlainModel) {
  ParallelOptions opts;
  opts.mode = "model";
  for (const char* mode : {"model", "hybrid"}) {
    opts.mode = mode;
    opts.activations = "int8";  // ignored with one worker: nothing is exchanged
    const RunResult r = run(mlp({16}, 0.25f), opts, 1, 4, 8);
    EXPECT_FALSE(r.has_block) << mode;
    EXPECT_NE(r.describe[0].find("allreduce"), std::string::npos) << r.describe[0];
    // Bit for bit the plain data-parallel run of one worker.
    const RunResult plain = run(mlp({16}, 0.25f), {}, 1, 4, 8);
    EXPECT_EQ(r.loss, plain.loss) << mode;
    EXPECT_EQ(r.params[0], plain.params[0]) << mode;
  }
}

// A split layer narrower than the worker count is refused on every rank, naming the layer
// (its model index and shape); the same width replicated (the classifier) is accepted.
TEST(ModelParallel, WidthBelowWorkerCountIsRefusedNamingTheLayer) {
  comm::ThreadWorld world(4);
  world.run([&](comm::Communicator& c) {
    ParallelOptions opts;
    opts.mode = "model";
    try {  // 12 -> 3 -> 5: the 3-wide layer is column-parallel, rank 3 would get no column
      build_parallel_model(mlp({3}, 0)(), opts, c, cpu_backend(), {kFeatures}, kClasses, 1);
      ADD_FAILURE() << "rank " << c.rank() << ": width 3 over 4 workers was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("layer 1 Linear(12 -> 3)"), std::string::npos)
          << e.what();
    }
    opts.linear = {"replicated", "replicated"};
    EXPECT_NO_THROW(
        build_parallel_model(mlp({3}, 0)(), opts, c, cpu_backend(), {kFeatures}, kClasses, 1));
  });
}

TEST(ModelParallel, ReplicatedClassifierStaysIdenticalAcrossRanks) {
  ParallelOptions opts;
  opts.mode = "model";
  const RunResult r = run(mlp({13, 7}, 0.25f), opts, 3, 5, 8);
  const size_t tail = size_t(7 * kClasses + kClasses);  // the replicated Linear(7 -> 5)
  for (int q = 1; q < 3; ++q) {
    const auto& a = r.params[0];
    const auto& b = r.params[size_t(q)];
    ASSERT_GE(b.size(), tail);
    EXPECT_TRUE(std::equal(a.end() - long(tail), a.end(), b.end() - long(tail))) << "rank " << q;
  }
}

LayersFn tiny_cnn(int64_t hidden) {
  return [=] {
    std::vector<std::unique_ptr<nn::Layer>> l;
    l.push_back(std::make_unique<nn::Conv2d>(1, 3, 3, 1, 1));
    l.push_back(std::make_unique<nn::ReLU>());
    l.push_back(std::make_unique<nn::MaxPool2d>(2));
    l.push_back(std::make_unique<nn::Flatten>());
    l.push_back(std::make_unique<nn::Linear>(3 * 2 * 1, hidden));
    l.push_back(std::make_unique<nn::ReLU>());
    l.push_back(std::make_unique<nn::Dropout>(0.2f));
    l.push_back(std::make_unique<nn::Linear>(hidden, kClasses));
    return l;
  };
}

TEST(ModelParallel, HybridCnnEqualsSingleWorker) {
  ParallelOptions opts;
  opts.mode = "hybrid";  // conv data-parallel on own samples, dense model-parallel
  for (int n = 1; n <= 3; ++n) {
    SCOPED_TRACE(fmt::format("{} workers", n));
    expect_matches_single(tiny_cnn(11), opts, n, 2e-5, {1, 4, 3});
  }
}

TEST(ModelParallel, Int8ActivationsStayClose) {
  // Error stated: the loss of 6 steps with 8-bit activations (gather, allreduce of partial
  // sums, reduce-scatter of the input gradient) stays within 2% of fp32's.
  ParallelOptions opts;
  opts.mode = "hybrid";
  opts.activations = "int8";
  const int steps = 6;
  std::vector<double> ref_loss;
  reference_logits(tiny_cnn(11), 2, steps, 8, {1, 4, 3}, &ref_loss);
  const RunResult r = run(tiny_cnn(11), opts, 2, steps, 8, {1, 4, 3});
  for (int s = 0; s < steps; ++s) {
    EXPECT_NEAR(r.loss[size_t(s)], ref_loss[size_t(s)], 0.02 * ref_loss[size_t(s)]) << s;
  }
  EXPECT_NE(r.describe[0].find("int8"), std::string::npos);
  // And it is not the exact path: some loss differs.
  double d = 0;
  for (int s = 0; s < steps; ++s)
    d = std::max(d, std::fabs(r.loss[size_t(s)] - ref_loss[size_t(s)]));
  EXPECT_GT(d, 0.0);
}

TEST(ModelParallel, BadLayoutsAreRefused) {
  comm::ThreadWorld world(2);
  world.run([&](comm::Communicator& c) {
    ParallelOptions opts;
    opts.mode = "model";
    opts.linear = {"row", "replicated"};
    EXPECT_THROW(
        build_parallel_model(mlp({8}, 0)(), opts, c, cpu_backend(), {kFeatures}, kClasses, 1),
        ConfigError);
    opts.linear = {"column"};  // wrong count
    EXPECT_THROW(
        build_parallel_model(mlp({8}, 0)(), opts, c, cpu_backend(), {kFeatures}, kClasses, 1),
        ConfigError);
    opts.linear = {"data", "row"};  // data only in hybrid
    EXPECT_THROW(
        build_parallel_model(mlp({8}, 0)(), opts, c, cpu_backend(), {kFeatures}, kClasses, 1),
        ConfigError);
  });
}

TEST(ModelParallel, ConfigKeys) {
  Config cfg;
  cfg.set_override("parallel=hybrid");
  cfg.set_override("parallel.activations=int8");
  const ParallelOptions o = plan::read_parallel_options(cfg);
  EXPECT_EQ(o.mode, "hybrid");
  EXPECT_EQ(o.activations, "int8");
  cfg.set_override("parallel.mode=model");
  EXPECT_THROW(plan::read_parallel_options(cfg), ConfigError);  // both spellings
  Config bad;
  bad.set_override("parallel.activations=int4");
  EXPECT_THROW(plan::read_parallel_options(bad), ConfigError);
}

}  // namespace
}  // namespace loom::sync
