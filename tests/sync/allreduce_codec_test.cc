// The allreduce strategy with codecs: the identity codec through the compressed collective
// equals the plain strategy; every lossy codec still trains; 1-bit needs error feedback; bytes
// per step are what the codec promises; the codec options (warm-up, momentum correction and
// masking, small buckets exact, gathered 1-bit) each do what they say on a small case.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

#include "loom/comm/transport_registry.h"
#include "loom/compress/identity_codec.h"
#include "loom/compress/registry.h"
#include "loom/core/rng.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/optim/optimizer.h"
#include "loom/plan/codec_reader.h"
#include "loom/plan/model_reader.h"
#include "loom/plan/optim_reader.h"
#include "loom/plan/strategy_factory.h"
#include "loom/sync/allreduce/allreduce_strategy.h"
#include "loom/sync/allreduce/compressed_allreduce.h"
#include "loom/tensor/backend_registry.h"
#include "tiny_training.h"

namespace loom::sync {
namespace {

using testing::max_abs_diff;
using testing::run_tiny;
using testing::tiny_config;

testing::StrategyMaker with_codec(std::shared_ptr<const compress::Codec> codec, bool overlap,
                                  int64_t bucket_bytes) {
  return [=](comm::Communicator& c, nn::Model& m, optim::Optimizer& o) {
    AllreduceOptions opts;
    opts.codec = codec;
    opts.combine = overlap ? CombineWhere::kThread : CombineWhere::kAfterBackward;
    opts.bucket_bytes = bucket_bytes;
    return std::make_unique<AllreduceStrategy>(c, m, o, opts);
  };
}

TEST(AllreduceCodec, IdentityCodecEqualsThePlainStrategy) {
  Config cfg = tiny_config();
  cfg.set("optim.momentum", 0.9);
  cfg.set("sync.bucket_kib", int64_t(1));  // several buckets (the model has ~1000 floats)
  for (int workers : {2, 3}) {
    const testing::TinyRun plain = run_tiny(cfg, workers, 30, 16);
    const auto identity = std::make_shared<compress::IdentityCodec>();
    for (bool overlap : {true, false}) {
      const testing::TinyRun coded =
          run_tiny(cfg, workers, 30, 16, with_codec(identity, overlap, 1024));
      // Only the order of the float sums differs (owners sum in rank order, the ring in ring
      // order), and with 3 workers the identity path updates unsharded.
      EXPECT_LT(max_abs_diff(plain.final_params, coded.final_params), 1e-5)
          << workers << " workers, overlap " << overlap;
      EXPECT_TRUE(coded.replicas_equal);
      EXPECT_GT(max_abs_diff(plain.init_params, coded.final_params), 1e-2);  // it did train
    }
  }
}

TEST(AllreduceCodec, Fp32ByConfigIsThePlainPathAndCountsItsBytes) {
  Config cfg = tiny_config();
  cfg.set("codec", std::string("fp32"));
  const testing::TinyRun r = run_tiny(cfg, 2, 10, 16);
  EXPECT_NE(r.describe.find("fp32"), std::string::npos) << r.describe;
  EXPECT_NE(r.describe.find("optimizer sharded"), std::string::npos) << r.describe;
  // One bucket, sharded: reduce-scatter and allgather each send the other rank's half.
  const int64_t n = int64_t(r.final_params.size());
  EXPECT_EQ(r.stats.bytes_sent, 10 * 2 * (n / 2) * 4);
}

TEST(AllreduceCodec, BytesSentPerStepMatchTheCodec) {
  Config cfg = tiny_config();
  for (const char* name : {"fp16", "int8", "onebit"}) {
    cfg.set("codec", std::string(name));
    const testing::TinyRun r = run_tiny(cfg, 2, 5, 16);
    const auto codec = compress::make_codec(plan::read_codec_options(cfg));
    const size_t n = r.final_params.size();
    // 1-bit at two workers is gathered by default (codec.aggregation).
    const compress::Aggregation how = std::string(name) == "onebit"
                                          ? compress::Aggregation::kGather
                                          : compress::Aggregation::kStripes;
    EXPECT_EQ(r.stats.bytes_sent,
              5 * int64_t(sync::compressed_allreduce_wire_bytes(*codec, n, 2, how)))
        << name;
    EXPECT_NE(r.describe.find(std::string("codec ") + name), std::string::npos) << r.describe;
    EXPECT_NE(r.describe.find("MB/step"), std::string::npos) << r.describe;
    // The log says how the residual is kept.
    const std::string residual = std::string(name) == "fp16" ? "bf16 residual" : "fp32 residual";
    EXPECT_NE(r.describe.find(residual), std::string::npos) << r.describe;
  }
  // fp16 sends half of fp32's bytes (the ring allreduce of the same bucket).
  cfg.set("codec", std::string("fp16"));
  const testing::TinyRun half = run_tiny(cfg, 2, 4, 16);
  // (each stripe's encoding is padded to 4 bytes: 501 halves take 1004 bytes).
  const double fp32_bytes =
      4.0 * double(sync::fp32_allreduce_wire_bytes(half.final_params.size(), 2));
  EXPECT_NEAR(double(half.stats.bytes_sent) / fp32_bytes, 0.5, 0.005);
}

TEST(AllreduceCodec, LossyCodecsTrain) {
  // 300 steps of 2 x 16 samples: fp32 takes the loss from ln(10) = 2.30 to ~0.3.
  Config base = tiny_config();
  const testing::TinyRun fp32 = run_tiny(base, 2, 300, 16);
  const double fp32_tail = fp32.mean_loss(250, 300);
  EXPECT_LT(fp32_tail, 0.6);
  RecordProperty("tail_loss_fp32", std::to_string(fp32_tail));
  struct Case {
    const char* codec;
    const char* key;
    double value;
    double slack;  // allowed tail loss relative to fp32's
  };
  for (const Case& k : {Case{"fp16", nullptr, 0, 1.05}, Case{"bf16", nullptr, 0, 1.1},
                        Case{"int8", nullptr, 0, 1.1}, Case{"onebit", nullptr, 0, 1.5},
                        Case{"topk", "codec.topk_fraction", 0.05, 2.0},
                        Case{"powersgd", "codec.powersgd_rank", 2, 2.0}}) {
    Config cfg = base;
    cfg.set("codec", std::string(k.codec));
    cfg.set("codec.min_bucket_kib", int64_t(0));  // the tiny model is one small bucket
    if (k.key) {
      if (std::string(k.key) == "codec.powersgd_rank")
        cfg.set(k.key, int64_t(k.value));
      else
        cfg.set(k.key, k.value);
    }
    const testing::TinyRun r = run_tiny(cfg, 2, 300, 16);
    const double tail = r.mean_loss(250, 300);
    EXPECT_TRUE(r.replicas_equal) << k.codec;
    EXPECT_LT(tail, 0.5 * r.mean_loss(0, 10)) << k.codec;
    EXPECT_LT(tail, k.slack * fp32_tail) << k.codec << " tail " << tail << " fp32 " << fp32_tail;
    RecordProperty(std::string("tail_loss_") + k.codec, std::to_string(tail));
  }
}

TEST(AllreduceCodec, MomentumCorrectionAtFullDensity) {
  // Top-k of 100% sends every pending entry each step. Each worker's velocity summed over the
  // workers is the global one, so momentum correction alone is momentum SGD; with DGC's
  // momentum factor masking every velocity is cleared each step: SGD without momentum.
  Config momentum = tiny_config();
  momentum.set("optim.momentum", 0.9);
  const testing::TinyRun msgd = run_tiny(momentum, 2, 20, 16);
  Config plain = tiny_config();
  plain.set("optim.momentum", 0.0);
  const testing::TinyRun sgd = run_tiny(plain, 2, 20, 16);
  Config cfg = momentum;
  cfg.set("codec", std::string("topk"));
  cfg.set("codec.topk_fraction", 1.0);
  cfg.set("codec.min_bucket_kib", int64_t(0));
  const testing::TinyRun mc = run_tiny(cfg, 2, 20, 16);  // on by default under momentum
  EXPECT_NE(mc.describe.find("momentum correction (each worker sends its velocity)"),
            std::string::npos)
      << mc.describe;
  EXPECT_TRUE(mc.replicas_equal);
  EXPECT_LT(max_abs_diff(msgd.final_params, mc.final_params), 1e-5);
  cfg.set("sync.momentum_masking", true);
  const testing::TinyRun masked = run_tiny(cfg, 2, 20, 16);
  EXPECT_NE(masked.describe.find("with masking"), std::string::npos) << masked.describe;
  EXPECT_TRUE(masked.replicas_equal);
  EXPECT_LT(max_abs_diff(sgd.final_params, masked.final_params), 1e-5);
  // At 5% both still train.
  cfg.set("codec.topk_fraction", 0.05);
  for (bool masking : {false, true}) {
    cfg.set("sync.momentum_masking", masking);
    const testing::TinyRun sparse = run_tiny(cfg, 2, 300, 16);
    EXPECT_LT(sparse.mean_loss(250, 300), 0.5 * sparse.mean_loss(0, 10)) << masking;
  }
  // Off: plain top-k under the optimizer's momentum.
  cfg.set("sync.momentum_masking", false);
  cfg.set("sync.momentum_correction", false);
  EXPECT_EQ(run_tiny(cfg, 2, 5, 16).describe.find("momentum correction"), std::string::npos);
}

// codec.warmup_steps = 5: steps 0-4 are summed exactly, the codec sends from step 5 on. At two
// workers the exact sum is the same bits as fp32's (a + b either way), so the first five steps
// reach fp32's parameters bit for bit and the sixth does not.
TEST(AllreduceCodec, WarmupEndsExactlyAtItsBoundary) {
  for (double momentum : {0.0, 0.9}) {
    SCOPED_TRACE(momentum);
    Config fp32 = tiny_config();
    fp32.set("optim.momentum", momentum);
    Config cfg = fp32;
    cfg.set("codec", std::string("onebit"));
    cfg.set("codec.warmup_steps", int64_t(5));
    const testing::TinyRun a5 = run_tiny(fp32, 2, 5, 16), b5 = run_tiny(cfg, 2, 5, 16);
    const testing::TinyRun a6 = run_tiny(fp32, 2, 6, 16), b6 = run_tiny(cfg, 2, 6, 16);
    EXPECT_NE(b5.describe.find("exact for the first 5 steps"), std::string::npos) << b5.describe;
    if (momentum == 0.0) {
      EXPECT_EQ(a5.final_params, b5.final_params);
    } else {
      // Momentum correction sums the workers' velocities: m (u0 + u1) against m u0 + m u1.
      EXPECT_NE(b5.describe.find("momentum correction"), std::string::npos) << b5.describe;
      EXPECT_LT(max_abs_diff(a5.final_params, b5.final_params), 1e-6);
    }
    EXPECT_GT(max_abs_diff(a6.final_params, b6.final_params), 1e-4);
    EXPECT_TRUE(b6.replicas_equal);
    // Bytes: five fp32 steps, then the codec's.
    const size_t n = b6.final_params.size();
    const auto codec = compress::make_codec(plan::read_codec_options(cfg));
    EXPECT_EQ(b6.stats.bytes_sent, 5 * int64_t(fp32_allreduce_wire_bytes(n, 2)) +
                                       int64_t(compressed_allreduce_wire_bytes(
                                           *codec, n, 2, compress::Aggregation::kGather)));
  }
}

// A bucket smaller than codec.min_bucket_kib skips the codec: its bytes are fp32's.
TEST(AllreduceCodec, SmallBucketsAreSummedExactly) {
  Config cfg = tiny_config();  // layers of 20*32+32 = 672 and 32*10+10 = 330 floats
  cfg.set("sync.bucket_kib", int64_t(1));
  cfg.set("codec", std::string("topk"));
  cfg.set("codec.min_bucket_kib", int64_t(2));  // 512 floats: the 330 exact, the 672 not
  const testing::TinyRun r = run_tiny(cfg, 2, 4, 16);
  const auto codec = compress::make_codec(plan::read_codec_options(cfg));
  EXPECT_EQ(r.stats.bytes_sent, 4 * int64_t(fp32_allreduce_wire_bytes(330, 2) +
                                            compressed_allreduce_wire_bytes(*codec, 672, 2)));
  EXPECT_NE(r.describe.find("1 bucket under 512 floats exact"), std::string::npos) << r.describe;
  // Top-k's default (64 KiB) covers the whole tiny model: every bucket exact, so the run is
  // fp32's (momentum 0, so no momentum correction either).
  Config topk = tiny_config();
  topk.set("codec", std::string("topk"));
  const testing::TinyRun all_exact = run_tiny(topk, 2, 6, 16);
  const testing::TinyRun fp32 = run_tiny(tiny_config(), 2, 6, 16);
  EXPECT_EQ(all_exact.final_params, fp32.final_params);
}

// 1-bit at two workers gathers the encodings (the same bytes as the stripes, one quantisation
// instead of two); at three it keeps the stripes, which send less there.
TEST(AllreduceCodec, OnebitGathersAtTwoWorkers) {
  Config cfg = tiny_config();
  cfg.set("codec", std::string("onebit"));
  EXPECT_NE(run_tiny(cfg, 2, 2, 16).describe.find("encodings gathered"), std::string::npos);
  EXPECT_EQ(run_tiny(cfg, 3, 2, 16).describe.find("encodings gathered"), std::string::npos);
  cfg.set("codec.aggregation", std::string("stripes"));
  EXPECT_EQ(run_tiny(cfg, 2, 2, 16).describe.find("encodings gathered"), std::string::npos);
  cfg.set("codec.aggregation", std::string("gather"));
  cfg.set("codec", std::string("int8"));
  const testing::TinyRun g3 = run_tiny(cfg, 3, 2, 16);
  EXPECT_NE(g3.describe.find("encodings gathered"), std::string::npos);
  EXPECT_TRUE(g3.replicas_equal);
}

// Momentum correction through 1-bit on a constant gradient: the parameters move as momentum
// SGD's do, less exactly what the codec still holds (lr times the residuals). Nothing is lost
// or applied twice, and as the displacement grows the part held back shrinks against it.
struct ConstantGradientRun {
  double relative_gap = 0;  // || p_T - momentum SGD's p_T || / || momentum SGD's p_T - p_0 ||
  double identity = 0;      // max_i | p_T - (momentum SGD's p_T + lr * residuals held) |, relative
  std::string describe;
};

ConstantGradientRun constant_gradient_run(int steps) {
  const int world = 2;
  const float lr = 0.01f, m = 0.9f;
  Config cfg = tiny_config();
  cfg.set("optim.momentum", double(m));
  cfg.set("codec", std::string("onebit"));
  std::vector<std::vector<float>> grad(world);
  for (int r = 0; r < world; ++r) {
    Rng rng(11, uint64_t(r), RngPurpose::kTest);
    for (int i = 0; i < 1002; ++i) grad[size_t(r)].push_back(rng.normal());
  }
  std::vector<float> p0, p;
  std::vector<double> held;
  ConstantGradientRun out;
  comm::CommOptions copts;
  copts.timeout_s = 10;
  auto tw = comm::create_world("thread", world, copts);
  std::mutex mu;
  tw->run([&](comm::Communicator& c) {
    Backend& be = cpu_backend();
    auto model = nn::build_model(plan::read_model_spec(cfg), be, {20}, 10);
    model->init_params(1);
    LOOM_CHECK_EQ(size_t(model->num_params()), grad[0].size());
    auto opt = optim::make_optimizer(plan::read_optimizer_options(cfg), be, model->num_params());
    auto strategy = plan::make_strategy(cfg, c, *model, *opt);
    strategy->start();
    const std::vector<float> start(model->params(), model->params() + model->num_params());
    for (int t = 0; t < steps; ++t) {
      strategy->begin_step(t, lr);
      std::copy(grad[size_t(c.rank())].begin(), grad[size_t(c.rank())].end(), model->grads());
      const auto& ranges = model->param_ranges();
      for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) strategy->on_gradients_ready(*it);
      strategy->end_step();
    }
    StrategyState st;
    strategy->save_state(st);
    std::lock_guard<std::mutex> lock(mu);
    const std::vector<float>& r = st.floats.at("bucket0.worker0.residual");  // gathered
    held.resize(r.size(), 0.0);
    for (size_t i = 0; i < r.size(); ++i) held[i] += r[i];
    if (c.rank() == 0) {
      out.describe = strategy->describe();
      p0 = start;
      p.assign(model->params(), model->params() + model->num_params());
    }
  });
  // Momentum SGD on the summed gradient G: p_T = p_0 - lr sum_t v_t, v_t = m v_{t-1} + G.
  double gap2 = 0, moved2 = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double g = double(grad[0][i]) + double(grad[1][i]);
    double v = 0, total = 0;
    for (int t = 0; t < steps; ++t) total += (v = m * v + g);
    const double exact = double(p0[i]) - lr * total;
    gap2 += (p[i] - exact) * (p[i] - exact);
    moved2 += (exact - p0[i]) * (exact - p0[i]);
    out.identity = std::max(
        out.identity, std::fabs(p[i] - (exact + lr * held[i])) / (1e-3 + std::fabs(exact - p0[i])));
  }
  out.relative_gap = std::sqrt(gap2 / moved2);
  return out;
}

TEST(AllreduceCodec, MomentumCorrectionIsUnbiasedOnAConstantGradient) {
  const ConstantGradientRun short_run = constant_gradient_run(100);
  const ConstantGradientRun long_run = constant_gradient_run(400);
  EXPECT_NE(long_run.describe.find("momentum correction"), std::string::npos) << long_run.describe;
  EXPECT_LT(short_run.identity, 1e-3);
  EXPECT_LT(long_run.identity, 1e-3);
  EXPECT_LT(long_run.relative_gap, 0.5 * short_run.relative_gap);
  EXPECT_LT(long_run.relative_gap, 0.05);
  RecordProperty("relative_gap_100", std::to_string(short_run.relative_gap));
  RecordProperty("relative_gap_400", std::to_string(long_run.relative_gap));
}

TEST(AllreduceCodec, OnebitNeedsErrorFeedback) {
  Config cfg = tiny_config();
  cfg.set("codec", std::string("onebit"));
  // In stripes each value is quantised twice (worker, then owner), where error feedback
  // matters most; gathered, the run without it ends at 0.088 against 0.067.
  cfg.set("codec.aggregation", std::string("stripes"));
  const testing::TinyRun with_ef = run_tiny(cfg, 2, 300, 16);
  cfg.set("codec.error_feedback", false);
  const testing::TinyRun without = run_tiny(cfg, 2, 300, 16);
  const double a = with_ef.mean_loss(200, 300), b = without.mean_loss(200, 300);
  EXPECT_LT(a, 0.75 * b) << "with EF " << a << ", without " << b;
  RecordProperty("with_ef", std::to_string(a));
  RecordProperty("without_ef", std::to_string(b));
  EXPECT_NE(without.describe.find("error feedback off"), std::string::npos) << without.describe;
}

}  // namespace
}  // namespace loom::sync
