// The records of the codecs built into loom (codec_kind.h). Adding a codec: its header and .cc
// file, and its record here. The cost figures are fp32-sized passes over the gradient in memory
// (encode + decode), counted from each codec's kernels; the wire size comes from the codec.
#include <fmt/format.h>

#include <bit>
#include <limits>

#include "loom/compress/bf16_codec.h"
#include "loom/compress/builtin_codec_kinds.h"
#include "loom/compress/fp16_codec.h"
#include "loom/compress/identity_codec.h"
#include "loom/compress/int8_codec.h"
#include "loom/compress/onebit_codec.h"
#include "loom/compress/powersgd_codec.h"
#include "loom/compress/topk_codec.h"
#include "loom/core/error.h"

namespace loom::compress {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

CodecKind identity_kind() {
  CodecKind k;
  k.name = "fp32";
  k.summary = "uncompressed";
  k.lossy = false;
  k.summable = true;
  k.make = [](const CodecParams&) { return std::make_unique<IdentityCodec>(); };
  return k;
}

CodecKind fp16_kind() {
  CodecKind k;
  k.name = "fp16";
  k.summary = "cast to 16-bit floats (Horovod's fp16 compression)";
  k.summable = true;
  k.cost.memory_passes = 3;  // cast down: read 4 + write 2 bytes; up: read 2 + write 4
  k.device_kernels = true;
  k.make = [](const CodecParams&) { return std::make_unique<Fp16Codec>(); };
  return k;
}

CodecKind bf16_kind() {
  CodecKind k;
  k.name = "bf16";
  k.summary = "cast to bfloat16";
  k.summable = true;
  k.cost.memory_passes = 3;
  k.device_kernels = true;
  k.auto_candidate = false;
  k.not_auto_reason = "codec bf16 (the bytes of fp16 with 8 fewer bits of precision)";
  k.make = [](const CodecParams&) { return std::make_unique<Bf16Codec>(); };
  return k;
}

CodecKind int8_kind() {
  CodecKind k;
  k.name = "int8";
  k.summary = "8-bit dynamic tree with an absmax per block";
  k.reference = "Dettmers, ICLR 2016";
  // Not summable: stripes are exchanged, decoded, summed, re-encoded and gathered. Passes:
  // absmax, encode, decode of the stripes, the owner's re-encode, the final decode.
  k.cost.memory_passes = 6;
  k.device_kernels = true;
  k.keys = {{"codec.int8_block", int64_t(kInt8DefaultBlock), 8, 1 << 20,
             "int8: elements per absmax block (power of two, 8 .. 2^20)"}};
  k.make = [](const CodecParams& p) {
    const int64_t block = p.integer("codec.int8_block");
    if (!std::has_single_bit(uint64_t(block)))
      throw ConfigError(fmt::format("{}: key 'codec.int8_block': {} is not a power of two",
                                    p.where("codec.int8_block"), block));
    return std::make_unique<Int8Codec>(size_t(block));
  };
  return k;
}

CodecKind onebit_kind() {
  CodecKind k;
  k.name = "onebit";
  k.summary = "1 bit per element and two reconstruction values per column, with error feedback";
  k.reference = "Seide et al., Interspeech 2014";
  // Residual add, column means, quantise + residual, decode, the owner's pass.
  k.cost.memory_passes = 8;
  k.device_kernels = true;
  // 1% of the run, at most 10 steps (docs/compress.md measures what it recovers and costs).
  k.warmup_percent = 1;
  k.warmup_max_steps = 10;
  k.gather_at_two_ranks = true;
  k.momentum_correction = true;
  k.keys = {{"codec.onebit_column", int64_t(kOnebitDefaultColumn), 32, 1 << 24,
             "onebit: elements per pair of reconstruction values (multiple of 32)"}};
  k.make = [](const CodecParams& p) {
    const int64_t col = p.integer("codec.onebit_column");
    if (col % 32 != 0)
      throw ConfigError(fmt::format("{}: key 'codec.onebit_column': {} is not a multiple of 32",
                                    p.where("codec.onebit_column"), col));
    return std::make_unique<OnebitCodec>(size_t(col));
  };
  return k;
}

CodecKind topk_kind() {
  CodecKind k;
  k.name = "topk";
  k.summary = "the largest entries with their indices, with error feedback, all-gathered";
  k.reference = "Lin et al., ICLR 2018";
  k.aggregation = Aggregation::kGather;
  k.cost.memory_passes = 6;  // residual add, threshold selection (sampled), scatter back
  k.device_kernels = true;
  // Its 1% of a small output layer starves that layer (docs/compress.md).
  k.min_bucket_kib = 64;
  k.momentum_correction = true;
  k.momentum_masking = true;
  // The range is the maker's to check: (0, 1] is open at 0.
  k.keys = {{"codec.topk_fraction", kTopkDefaultFraction, -kInf, kInf,
             "topk: fraction of entries sent, (0, 1]"}};
  k.make = [](const CodecParams& p) {
    const double f = p.real("codec.topk_fraction");
    if (!(f > 0.0 && f <= 1.0))
      throw ConfigError(fmt::format("{}: key 'codec.topk_fraction': {} is out of range (0, 1]",
                                    p.where("codec.topk_fraction"), f));
    return std::make_unique<TopkCodec>(f);
  };
  return k;
}

CodecKind powersgd_kind() {
  CodecKind k;
  k.name = "powersgd";
  k.summary = "low-rank factors P and Q of each bucket's matrix, with error feedback";
  k.reference = "Vogels et al., NeurIPS 2019";
  k.aggregation = Aggregation::kLinear;
  // Two allreduces (P, then Q); the matmuls M Q, M^T P and P Q^T are 6 r FLOPs per element.
  k.cost.collectives = 2;
  k.cost.memory_passes = 4;
  k.cost.extra_flops_per_element = 6.0 * double(kPowerSgdDefaultRank);
  k.auto_candidate = false;
  k.not_auto_reason =
      "codec powersgd (its speed depends on each layer's matrix shape, which the start-up does "
      "not time)";
  k.keys = {
      {"codec.powersgd_rank", int64_t(kPowerSgdDefaultRank), 1, 1024,
       "powersgd: rank of the approximation"},
      {"codec.powersgd_cols", int64_t(0), 0, double(int64_t(1) << 31),
       "powersgd: columns of the matrix a bucket is seen as (0: ceil(sqrt(n)))"},
      {"codec.seed", int64_t(0x5eed), -kInf, kInf, "powersgd: seed of the initial Q"},
  };
  k.make = [](const CodecParams& p) {
    const int64_t rank = p.integer("codec.powersgd_rank");
    const int64_t cols = p.integer("codec.powersgd_cols");
    const int64_t seed = p.integer("codec.seed");
    return std::make_unique<PowerSgdCodec>(size_t(rank), size_t(cols), uint64_t(seed));
  };
  return k;
}

}  // namespace

std::vector<CodecKind> builtin_codec_kinds() {
  return {identity_kind(), fp16_kind(), bf16_kind(),    int8_kind(),
          onebit_kind(),   topk_kind(), powersgd_kind()};
}

}  // namespace loom::compress
