// The allreduce strategy with codecs: the identity codec through the compressed collective
// equals the plain strategy; every lossy codec still trains; 1-bit needs error feedback; bytes
// per step are what the codec promises.
#include <gtest/gtest.h>

#include "loom/sync/allreduce/compressed_allreduce.h"
#include "loom/compress/identity_codec.h"
#include "loom/compress/registry.h"
#include "loom/sync/allreduce/allreduce_strategy.h"
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
    const auto codec = compress::make_codec(cfg);
    const size_t n = r.final_params.size();
    EXPECT_EQ(r.stats.bytes_sent,
              5 * int64_t(sync::compressed_allreduce_wire_bytes(*codec, n, 2)))
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

TEST(AllreduceCodec, MomentumCorrectionAtFullDensityIsSgdWithoutMomentum) {
  // DGC's momentum factor masking (Lin et al. 2018): top-k of 100% sends every pending entry,
  // so each worker's velocity is cleared every step and the sum is applied without momentum.
  Config plain = tiny_config();
  plain.set("optim.momentum", 0.0);
  const testing::TinyRun sgd = run_tiny(plain, 2, 20, 16);
  Config cfg = tiny_config();
  cfg.set("optim.momentum", 0.9);
  cfg.set("codec", std::string("topk"));
  cfg.set("codec.topk_fraction", 1.0);
  cfg.set("sync.momentum_correction", true);
  const testing::TinyRun mc = run_tiny(cfg, 2, 20, 16);
  EXPECT_NE(mc.describe.find("momentum correction"), std::string::npos) << mc.describe;
  EXPECT_TRUE(mc.replicas_equal);
  EXPECT_LT(max_abs_diff(sgd.final_params, mc.final_params), 1e-5);
  // At 5% it still trains.
  cfg.set("codec.topk_fraction", 0.05);
  const testing::TinyRun sparse = run_tiny(cfg, 2, 300, 16);
  EXPECT_LT(sparse.mean_loss(250, 300), 0.5 * sparse.mean_loss(0, 10));
}

TEST(AllreduceCodec, OnebitNeedsErrorFeedback) {
  Config cfg = tiny_config();
  cfg.set("codec", std::string("onebit"));
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
