// Every vectorised kernel against its plain scalar reference: identical packed bytes and
// identical residuals, over lengths that hit every tail, several scales, several steps.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "compress/codec_test_util.h"
#include "loom/compress/bf16_codec.h"
#include "loom/compress/fp16_codec.h"
#include "loom/compress/half.h"
#include "loom/compress/int8_codec.h"
#include "loom/compress/onebit_codec.h"
#include "loom/compress/topk_codec.h"

namespace loom::compress {
namespace {

using testing::random_normal;

const size_t kLengths[] = {0, 1, 3, 7, 8, 9, 15, 16, 31, 32, 33, 100, 511, 512, 513, 4099};
// Scales that put values in fp16's subnormal range, around 1 and beyond its maximum.
const float kScales[] = {1e-6f, 1e-3f, 1.0f, 1e3f, 1e5f};

// memcmp that takes empty vectors: their data() may be null, which memcmp must not get even for
// 0 bytes (UBSan: "null pointer passed as argument 1").
int bytes_cmp(const void* a, const void* b, size_t bytes) {
  return bytes == 0 ? 0 : std::memcmp(a, b, bytes);
}

// offset: the output starts that many elements into its buffer (the kernels align to the
// residual with a masked head, so the output's own alignment varies with it).
// Every byte 0x5a: a sentinel for output elements neither encoder should write, for plain
// integers and for aggregates (TopkEntry) alike.
template <typename T>
T sentinel() {
  T t;
  std::memset(&t, 0x5a, sizeof t);
  return t;
}

template <typename T, typename Fast, typename Ref>
void expect_same_encoding(size_t n, float scale, size_t out_elems, Fast fast, Ref ref,
                          size_t offset = 0) {
  std::vector<float> r1 = random_normal(n, 7 + n, scale * 0.1f), r2 = r1;
  for (uint64_t step = 0; step < 3; ++step) {
    auto g = random_normal(n, 100 * n + step, scale);
    std::vector<T> o1(out_elems + 1 + offset, sentinel<T>()), o2(o1);
    bool ok1 = fast(g.data(), r1.data(), n, o1.data() + offset);
    bool ok2 = ref(g.data(), r2.data(), n, o2.data() + offset);
    ASSERT_TRUE(ok1 && ok2);
    ASSERT_EQ(0, std::memcmp(o1.data(), o2.data(), o1.size() * sizeof(T)))
        << "n=" << n << " scale=" << scale << " step=" << step;
    ASSERT_EQ(0, bytes_cmp(r1.data(), r2.data(), n * sizeof(float))) << "residual n=" << n;
  }
}

// The fp16 / bf16 kernels by residual format, all with the float-residual signature the
// harnesses here use. A bf16-residual kernel gets r truncated to its top 16 bits and gives it
// back widened, which is exact both ways: comparing the float residuals compares the bits. The
// bf16 copy sits as far off a 64-byte line as r does (in elements), so the kernels' alignment
// heads see every case.
using FloatResidualEncoder = std::function<bool(const float*, float*, size_t, uint16_t*)>;

FloatResidualEncoder through_bf16_residual(
    std::function<bool(const float*, uint16_t*, size_t, uint16_t*)> fn) {
  return [fn](const float* g, float* r, size_t n, uint16_t* out) {
    const size_t skew = (reinterpret_cast<uintptr_t>(r) / sizeof(float)) % 32;
    std::vector<uint16_t, CacheLineAllocator<uint16_t>> buf(n + skew);
    uint16_t* rb = buf.data() + skew;
    for (size_t i = 0; i < n; ++i) rb[i] = uint16_t(std::bit_cast<uint32_t>(r[i]) >> 16);
    const bool ok = fn(g, rb, n, out);
    for (size_t i = 0; i < n; ++i) r[i] = std::bit_cast<float>(uint32_t(rb[i]) << 16);
    return ok;
  };
}

struct HalfKernels {
  FloatResidualEncoder fast, fast_avx2, fast_no_bf16, ref;
};

// fast, avx2, no_bf16 (the AVX-512 loop without AVX512_BF16), ref: generic lambdas that call
// the overloaded kernel for either residual type.
template <class Fast, class Avx2, class NoBf16, class Ref>
HalfKernels half_kernels(ResidualFormat f, Fast fast, Avx2 avx2, NoBf16 no_bf16, Ref ref) {
  auto as_float = [](auto k) {
    return FloatResidualEncoder(
        [k](const float* g, float* r, size_t n, uint16_t* o) { return k(g, r, n, o); });
  };
  auto as_bf16 = [](auto k) {
    return through_bf16_residual(
        [k](const float* g, uint16_t* r, size_t n, uint16_t* o) { return k(g, r, n, o); });
  };
  if (f == ResidualFormat::kF32)
    return {as_float(fast), as_float(avx2), as_float(no_bf16), as_float(ref)};
  return {as_bf16(fast), as_bf16(avx2), as_bf16(no_bf16), as_bf16(ref)};
}

HalfKernels fp16_kernels(ResidualFormat f) {
  return half_kernels(
      f, [](const float* g, auto* r, size_t n, uint16_t* o) { return fp16_encode(g, r, n, o); },
      [](const float* g, auto* r, size_t n, uint16_t* o) { return fp16_encode_avx2(g, r, n, o); },
      [](const float* g, auto* r, size_t n, uint16_t* o) {
        return fp16_encode_avx512_no_bf16(g, r, n, o);
      },
      [](const float* g, auto* r, size_t n, uint16_t* o) { return fp16_encode_ref(g, r, n, o); });
}

HalfKernels bf16_kernels(ResidualFormat f) {
  return half_kernels(
      f, [](const float* g, auto* r, size_t n, uint16_t* o) { return bf16_encode(g, r, n, o); },
      [](const float* g, auto* r, size_t n, uint16_t* o) { return bf16_encode_avx2(g, r, n, o); },
      [](const float* g, auto* r, size_t n, uint16_t* o) {
        return bf16_encode_avx512_no_bf16(g, r, n, o);
      },
      [](const float* g, auto* r, size_t n, uint16_t* o) { return bf16_encode_ref(g, r, n, o); });
}

const ResidualFormat kResidualFormats[] = {ResidualFormat::kF32, ResidualFormat::kBf16};

TEST(KernelsRef, Fp16EncodeAndDecodeMatchReference) {
  for (size_t n : kLengths)
    for (float s : kScales) {
      for (ResidualFormat f : kResidualFormats)
        for (size_t offset : {0, 1, 2, 15}) {
          const HalfKernels k = fp16_kernels(f);
          expect_same_encoding<Half>(n, s, n, k.fast, k.ref, offset);
          expect_same_encoding<Half>(n, s, n, k.fast_avx2, k.ref, offset);
          expect_same_encoding<Half>(n, s, n, k.fast_no_bf16, k.ref, offset);
        }
      std::vector<Half> in(n);
      for (size_t i = 0; i < n; ++i)
        in[i] = Half((i * 2654435761u) & 0x7bff) | Half(i % 2 ? 0x8000 : 0);
      for (auto mode : {DecodeMode::kWrite, DecodeMode::kAccumulate}) {
        std::vector<float> a(n, 0.5f), b(n, 0.5f);
        fp16_decode(in.data(), n, a.data(), mode);
        fp16_decode_ref(in.data(), n, b.data(), mode);
        ASSERT_EQ(0, bytes_cmp(a.data(), b.data(), n * sizeof(float)));
      }
    }
}

TEST(KernelsRef, Bf16EncodeAndDecodeMatchReference) {
  for (size_t n : kLengths)
    for (float s : kScales) {
      for (ResidualFormat f : kResidualFormats)
        for (size_t offset : {0, 1, 2, 15}) {
          const HalfKernels k = bf16_kernels(f);
          expect_same_encoding<Bf16>(n, s, n, k.fast, k.ref, offset);
          expect_same_encoding<Bf16>(n, s, n, k.fast_avx2, k.ref, offset);
          expect_same_encoding<Bf16>(n, s, n, k.fast_no_bf16, k.ref, offset);
        }
      std::vector<Bf16> in(n);
      for (size_t i = 0; i < n; ++i) in[i] = Bf16((i * 2654435761u) & 0xff7f);
      for (auto mode : {DecodeMode::kWrite, DecodeMode::kAccumulate}) {
        std::vector<float> a(n, 0.5f), b(n, 0.5f);
        bf16_decode(in.data(), n, a.data(), mode);
        bf16_decode_ref(in.data(), n, b.data(), mode);
        ASSERT_EQ(0, bytes_cmp(a.data(), b.data(), n * sizeof(float)));
      }
    }
}

// The fp16 / bf16 encoders where the bits decide, every one of them (AVX-512 where the CPU has
// it, and the AVX2 one; fp32 and bf16 residual) against the scalar reference: values at and
// around rounding ties, fp16 subnormals and the underflow to zero, float denormals (which
// vcvtne2ps2bf16 or DAZ would flush, in g and so in residuals), magnitudes past the clamp, zeros
// of both signs; at lengths
// that leave every head and tail, with g, r and the output at every relative alignment.
struct HalfEncoder {
  std::string name;
  FloatResidualEncoder fast, ref;
};

std::vector<HalfEncoder> half_encoders() {
  std::vector<HalfEncoder> v;
  for (ResidualFormat f : kResidualFormats) {
    const std::string res = f == ResidualFormat::kF32 ? "" : " bf16 residual";
    const HalfKernels h = fp16_kernels(f), b = bf16_kernels(f);
    v.push_back({"fp16" + res, h.fast, h.ref});
    v.push_back({"fp16 avx2" + res, h.fast_avx2, h.ref});
    v.push_back({"fp16 avx512 without bf16" + res, h.fast_no_bf16, h.ref});
    v.push_back({"bf16" + res, b.fast, b.ref});
    v.push_back({"bf16 avx2" + res, b.fast_avx2, b.ref});
    v.push_back({"bf16 avx512 without bf16" + res, b.fast_no_bf16, b.ref});
  }
  return v;
}

std::vector<float> half_edge_values() {
  std::vector<float> v;
  auto around = [&](float x, int ulps) {
    for (int k = -ulps; k <= ulps; ++k) {
      float y = std::bit_cast<float>(std::bit_cast<int32_t>(x) + k);
      if (!std::isfinite(y)) continue;  // one ulp above the float maximum
      v.push_back(y);
      v.push_back(-y);
    }
  };
  // fp16: ties between neighbours, the subnormal range and its rounding up into the normals,
  // the underflow tie at 2^-25, the largest finite half and what lies past it.
  for (float x : {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1000.0f + 0x1p-2f, 0x1p-24f, 0x1p-25f,
                  1.5f * 0x1p-25f, 3 * 0x1p-25f, 0x1p-14f - 0x1p-26f, 0x1p-14f, 0x1p-20f + 0x1p-25f,
                  65504.0f, 65519.0f, 65520.0f, 65536.0f})
    around(x, 2);
  // bf16: ties, the largest finite bfloat16 and the float maximum past it.
  for (float x : {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 0x1p-100f * (1.0f + 0x1p-8f), kBf16Max,
                  std::bit_cast<float>(0x7f7f8000u), std::numeric_limits<float>::max()})
    around(x, 2);
  // Normal floats whose bf16 rounding error is a float denormal (below 2^-103 it can be: the
  // error is a multiple of 2^(E-23)), which vcvtne2ps2bf16 would flush in a bf16 residual.
  for (float x : {0x1p-104f * (1.0f + 0x1p-20f), 0x1p-110f * (1.0f + 0x1p-20f),
                  0x1p-118f * (1.0f + 0x1p-12f), 0x1p-125f * (1.0f + 0x1p-22f)})
    around(x, 1);
  // Float denormals: the smallest, the largest (bf16 rounds it up to the smallest normal), a
  // bf16 tie among them.
  for (uint32_t b :
       {0x00000001u, 0x00008000u, 0x00018000u, 0x0000ffffu, 0x00400000u, 0x007fffffu, 0x00800000u})
    around(std::bit_cast<float>(b), 1);
  for (float x : {0.0f, 1e6f, 3e38f, 0.1f, 2.0f}) {
    v.push_back(x);
    v.push_back(-x);
  }
  return v;
}

TEST(KernelsRef, HalfEncodersOnEdgeValuesAtEveryAlignment) {
  const std::vector<float> edges = half_edge_values();
  const auto encoders = half_encoders();
  for (size_t n : {0, 1, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 1000, 4099})
    for (size_t go : {0, 1, 6, 13})
      for (size_t ro : {0, 3, 8, 15})
        for (size_t oo : {0, 1, 10, 31}) {
          // g: the edge values in a rotating order, with a gradient-like value every third
          // element; r: small values at every fourth element, zero elsewhere (so most s are
          // exactly the edge values).
          // The second step encodes -g: the residual then carries over without overflowing
          // (a residual near the float maximum, from a clamp, plus g again would be Inf).
          auto normal = random_normal(n, n + 31 * go + ro, 1e-3f);
          std::vector<float> gb(2 * (n + go)), rb(n + ro);
          float* g[2] = {gb.data() + go, gb.data() + n + 2 * go};
          for (size_t i = 0; i < n; ++i) {
            g[0][i] = i % 3 == 2 ? normal[i] : edges[(i * 7 + go + ro) % edges.size()];
            g[1][i] = -g[0][i];
          }
          for (size_t i = 0; i < n; ++i) rb[ro + i] = i % 4 != 3 ? 0.0f : 1e-4f * normal[n - 1 - i];
          for (const auto& k : encoders) {
            SCOPED_TRACE(std::string(k.name) + " n=" + std::to_string(n) + " offsets g " +
                         std::to_string(go) + " r " + std::to_string(ro) + " out " +
                         std::to_string(oo));
            std::vector<float> r1 = rb, r2 = rb;
            for (int step = 0; step < 2; ++step) {
              std::vector<uint16_t> o1(n + oo + 1, 0x5a5a), o2 = o1;
              ASSERT_TRUE(k.fast(g[step], r1.data() + ro, n, o1.data() + oo)) << "step " << step;
              ASSERT_TRUE(k.ref(g[step], r2.data() + ro, n, o2.data() + oo)) << "step " << step;
              ASSERT_EQ(o1, o2) << "step " << step;
              ASSERT_EQ(0, bytes_cmp(r1.data(), r2.data(), r1.size() * sizeof(float)))
                  << "step " << step;
            }
          }
        }
}

// NaN and Inf in g + r at every position (head, both halves of the loop's 32, tail), and as an
// overflow of a finite g + r:
// every encoder reports it and packs the reference's bytes and residuals (NaN payloads, signs
// and signalling NaNs included: such steps go through the reference).
TEST(KernelsRef, HalfEncodersOnNanAndInf) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> bad = {std::nanf(""),
                                  -std::nanf(""),
                                  inf,
                                  -inf,
                                  std::bit_cast<float>(0x7f800001u),
                                  std::bit_cast<float>(0xffbfffffu),
                                  std::bit_cast<float>(0x7fc12345u),
                                  std::bit_cast<float>(0x7fffe000u),
                                  std::bit_cast<float>(0xffffffffu)};
  const auto encoders = half_encoders();
  for (size_t n : {1, 17, 100, 1000})
    for (size_t at = 0; at < n; at += n < 200 ? 1 : 37)  // every lane of head, body and tail
      for (size_t b = 0; b <= bad.size(); ++b)
        for (const auto& k : encoders) {
          SCOPED_TRACE(std::string(k.name) + " n=" + std::to_string(n) + " at " +
                       std::to_string(at) + " kind " + std::to_string(b));
          std::vector<float> g = random_normal(n, 5 * n + at, 1.0f);
          std::vector<float> r1(n + 1, 0.0f);
          if (b < bad.size()) {
            g[at] = bad[b];
          } else {  // finite g and r whose sum overflows
            g[at] = 3e38f;
            r1[1 + at] = 3e38f;
          }
          std::vector<float> r2 = r1;
          std::vector<uint16_t> o1(n + 2, 0), o2(n + 2, 0);
          EXPECT_FALSE(k.fast(g.data(), r1.data() + 1, n, o1.data() + 1));
          EXPECT_FALSE(k.ref(g.data(), r2.data() + 1, n, o2.data() + 1));
          ASSERT_EQ(o1, o2);
          ASSERT_EQ(0, bytes_cmp(r1.data(), r2.data(), r1.size() * sizeof(float)));
        }
}

// Decoders (the dispatched and the AVX2 one) on every code, write and accumulate, output at
// every alignment, against the reference. fp16 signalling-NaN codes are left out: the encoders
// never produce them (a NaN packs as the quiet 0x7e00) and vcvtph2ps quiets them.
TEST(KernelsRef, HalfDecodersOnEveryCode) {
  using Dec = void (*)(const uint16_t*, size_t, float*, DecodeMode);
  struct D {
    const char* name;
    Dec fast, ref;
    bool fp16;
  };
  const D decoders[] = {{"fp16", fp16_decode, fp16_decode_ref, true},
                        {"fp16 avx2", fp16_decode_avx2, fp16_decode_ref, true},
                        {"bf16", bf16_decode, bf16_decode_ref, false},
                        {"bf16 avx2", bf16_decode_avx2, bf16_decode_ref, false}};
  for (const auto& k : decoders) {
    std::vector<uint16_t> codes;
    for (uint32_t c = 0; c < 0x10000; ++c) {
      const uint16_t code = uint16_t(c * 40503u);  // every code, scattered
      const bool snan = (code & 0x7c00) == 0x7c00 && (code & 0x3ff) != 0 && (code & 0x200) == 0;
      if (!(k.fp16 && snan)) codes.push_back(code);
    }
    for (size_t n : {size_t(0), size_t(1), size_t(15), size_t(17), size_t(31), size_t(33),
                     size_t(1000), codes.size()})
      for (size_t oo : {0, 1, 5, 14})
        for (auto mode : {DecodeMode::kWrite, DecodeMode::kAccumulate}) {
          SCOPED_TRACE(std::string(k.name) + " n=" + std::to_string(n) + " offset " +
                       std::to_string(oo) +
                       (mode == DecodeMode::kWrite ? " write" : " accumulate"));
          const uint16_t* in = codes.data() + (codes.size() - n) / 2;
          std::vector<float> base = random_normal(n + oo, n + oo, 1.0f);
          for (size_t i = 0; i < base.size(); i += 5) base[i] = 1e-40f;  // a denormal
          std::vector<float> a = base, b = base;
          k.fast(in, n, a.data() + oo, mode);
          k.ref(in, n, b.data() + oo, mode);
          ASSERT_EQ(0, bytes_cmp(a.data(), b.data(), a.size() * sizeof(float)));
        }
  }
}

TEST(KernelsRef, Int8EncodeAndDecodeMatchReference) {
  // int8_decode takes the AVX-512 VBMI path for block >= 64 where the CPU has it (64, 512);
  // int8_decode_avx2 is compared on its own as well.
  SCOPED_TRACE(int8_have_avx512_vbmi() ? "with AVX-512 VBMI" : "without AVX-512 VBMI");
  for (size_t block : {8, 64, 128, 512})
    for (size_t n : kLengths)
      for (float s : kScales) {
        size_t blocks = (n + block - 1) / block;
        auto fast = [&](const float* g, float* r, size_t n, uint8_t* out) {
          return int8_encode(g, r, n, block, reinterpret_cast<float*>(out), out + 4 * blocks);
        };
        auto ref = [&](const float* g, float* r, size_t n, uint8_t* out) {
          return int8_encode_ref(g, r, n, block, reinterpret_cast<float*>(out), out + 4 * blocks);
        };
        expect_same_encoding<uint8_t>(n, s, 4 * blocks + n, fast, ref);
        auto avx2 = [&](const float* g, float* r, size_t n, uint8_t* out) {
          return int8_encode_avx2(g, r, n, block, reinterpret_cast<float*>(out), out + 4 * blocks);
        };
        expect_same_encoding<uint8_t>(n, s, 4 * blocks + n, avx2, ref);
        auto g = random_normal(n, 3 * n + 1, s);
        std::vector<float> r(n, 0.0f), absmax(blocks);
        std::vector<uint8_t> codes(n);
        int8_encode(g.data(), r.data(), n, block, absmax.data(), codes.data());
        for (auto mode : {DecodeMode::kWrite, DecodeMode::kAccumulate}) {
          std::vector<float> a(n, 0.25f), b(n, 0.25f), c(n, 0.25f);
          int8_decode(absmax.data(), codes.data(), n, block, a.data(), mode);
          int8_decode_ref(absmax.data(), codes.data(), n, block, b.data(), mode);
          int8_decode_avx2(absmax.data(), codes.data(), n, block, c.data(), mode);
          ASSERT_EQ(0, bytes_cmp(a.data(), b.data(), n * sizeof(float))) << n << " " << block;
          ASSERT_EQ(0, bytes_cmp(c.data(), b.data(), n * sizeof(float))) << n << " " << block;
        }
      }
}

// Every fast encoder (streaming or not, AVX-512 or AVX2) on all-zero and all-negative input
// gives the reference's bytes, and a NaN or Inf anywhere (head, body, tail) is reported.
TEST(KernelsRef, FastEncodersOnZerosNegativesAndNonFinite) {
  using Enc = std::function<bool(const float*, float*, size_t, std::vector<uint8_t>&)>;
  struct Kernel {
    const char* name;
    Enc fast, ref;
  };
  auto half = [](auto fn) {
    return [fn](const float* g, float* r, size_t n, std::vector<uint8_t>& o) {
      o.assign(2 * n + 64, 0);
      return fn(g, r, n, reinterpret_cast<uint16_t*>(o.data() + 2));  // 2 bytes off alignment
    };
  };
  auto int8 = [](auto fn, size_t block) {
    return [fn, block](const float* g, float* r, size_t n, std::vector<uint8_t>& o) {
      size_t blocks = (n + block - 1) / block;
      o.assign(4 * blocks + n + 4, 0);
      return fn(g, r, n, block, reinterpret_cast<float*>(o.data()), o.data() + 4 * blocks);
    };
  };
  const std::vector<Kernel> kernels = {
      {"fp16", half(fp16_kernels(ResidualFormat::kF32).fast),
       half(fp16_kernels(ResidualFormat::kF32).ref)},
      {"fp16 bf16 residual", half(fp16_kernels(ResidualFormat::kBf16).fast),
       half(fp16_kernels(ResidualFormat::kBf16).ref)},
      {"fp16 avx2 bf16 residual", half(fp16_kernels(ResidualFormat::kBf16).fast_avx2),
       half(fp16_kernels(ResidualFormat::kBf16).ref)},
      {"bf16", half(bf16_kernels(ResidualFormat::kF32).fast),
       half(bf16_kernels(ResidualFormat::kF32).ref)},
      {"bf16 bf16 residual", half(bf16_kernels(ResidualFormat::kBf16).fast),
       half(bf16_kernels(ResidualFormat::kBf16).ref)},
      {"bf16 avx2", half(bf16_kernels(ResidualFormat::kF32).fast_avx2),
       half(bf16_kernels(ResidualFormat::kF32).ref)},
      {"int8 block 64", int8(int8_encode, 64), int8(int8_encode_ref, 64)},
      {"int8 avx2 block 64", int8(int8_encode_avx2, 64), int8(int8_encode_ref, 64)},
      {"int8 block 512", int8(int8_encode, 512), int8(int8_encode_ref, 512)},
  };
  for (const auto& k : kernels)
    for (size_t n : {1, 15, 16, 17, 100, 1027}) {
      SCOPED_TRACE(std::string(k.name) + " n=" + std::to_string(n));
      for (float fill : {0.0f, -0.0f, -3.0f, -1e-30f}) {
        std::vector<float> g(n, fill), r1(n, 0.0f), r2(n, 0.0f);
        for (size_t i = 0; fill < -1.0f && i < n; ++i) g[i] = fill * float(1 + i % 5);
        std::vector<uint8_t> o1, o2;
        ASSERT_TRUE(k.fast(g.data(), r1.data(), n, o1));
        ASSERT_TRUE(k.ref(g.data(), r2.data(), n, o2));
        ASSERT_EQ(o1, o2) << "fill " << fill;
        ASSERT_EQ(0, bytes_cmp(r1.data(), r2.data(), n * sizeof(float)));
      }
      for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity()})
        for (size_t at : {size_t(0), n / 2, n - 1}) {
          std::vector<float> g(n, -1.0f), r(n, 0.0f);
          g[at] = bad;
          std::vector<uint8_t> o;
          EXPECT_FALSE(k.fast(g.data(), r.data(), n, o)) << "non-finite at " << at;
        }
    }
}

// The int8 encoders where the level and the rounding decide: every decade threshold (0.1 ...
// 1e-6 of the block maximum) and its neighbours ulp by ulp, every power of two from 1 down to
// 2^-40 (the AVX-512 kernel finds the level from the exponent, one threshold per binade) with
// its neighbours, values near the midpoints between codes (round to nearest even in the
// reference), and magnitudes far below 1e-7 of the maximum; several block maxima, both signs,
// odd lengths. The dispatched (AVX-512 where present) and the AVX2 encoders against the
// reference, codes and residuals.
TEST(KernelsRef, Int8EncodersAtLevelBoundariesAndTies) {
  std::vector<float> rel;
  auto around = [&](float x, int ulps) {
    for (int k = -ulps; k <= ulps; ++k) {
      int32_t bits = std::bit_cast<int32_t>(x) + k;
      if (bits > 0) rel.push_back(std::bit_cast<float>(bits));
    }
  };
  for (float th : {1e-1f, 1e-2f, 1e-3f, 1e-4f, 1e-5f, 1e-6f, 1e-7f, 0.55e-6f}) around(th, 4);
  for (int k = 0; k <= 40; ++k) around(std::ldexp(1.0f, -k), 2);
  const auto& table = int8_dynamic_tree_table();
  for (int c = 1; c < 127; ++c) around(0.5f * (table[c] + table[c + 1]), 2);  // near ties
  for (float tiny : {1e-9f, 1e-12f, 1e-20f, 1e-30f, 1e-38f, 1e-44f}) rel.push_back(tiny);
  const size_t block = 64;
  for (float amax : {1.0f, 3.7f, 0.3f, 1e-20f, 6e20f})
    for (size_t n : {rel.size(), rel.size() + 13}) {
      // Each block starts with +-amax (its maximum); the rest are rel * amax, alternating sign.
      std::vector<float> g(n);
      for (size_t i = 0; i < n; ++i) {
        float sign = (i / 3) % 2 ? -1.0f : 1.0f;
        g[i] = i % block == 0 ? sign * amax : sign * rel[i % rel.size()] * amax;
      }
      const size_t blocks = (n + block - 1) / block;
      using Fn = bool (*)(const float*, float*, size_t, size_t, float*, uint8_t*);
      std::vector<uint8_t> want(4 * blocks + n);
      std::vector<float> r_want(n, 0.0f);
      ASSERT_TRUE(int8_encode_ref(g.data(), r_want.data(), n, block,
                                  reinterpret_cast<float*>(want.data()), want.data() + 4 * blocks));
      for (Fn fn : {Fn(int8_encode), Fn(int8_encode_avx2)}) {
        std::vector<uint8_t> got(4 * blocks + n);
        std::vector<float> r(n, 0.0f);
        ASSERT_TRUE(fn(g.data(), r.data(), n, block, reinterpret_cast<float*>(got.data()),
                       got.data() + 4 * blocks));
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(got[4 * blocks + i], want[4 * blocks + i])
              << "amax " << amax << " i " << i << " value " << g[i]
              << (fn == Fn(int8_encode) ? " (dispatched)" : " (avx2)");
        }
        ASSERT_EQ(got, want);
        ASSERT_EQ(0, bytes_cmp(r.data(), r_want.data(), n * sizeof(float)));
      }
    }
}

// The AVX-512 encoder forms block b + 1's s = g + r and maximum inside block b's level loop.
// Blocks whose maxima differ by decades (pairing a block with another's maximum changes its
// codes), lengths that end a block early or one value into the next, block sizes 64 ... 4096,
// three steps of error feedback, arrays large enough for the other schedules of step 1; and a
// NaN or Inf at either end of any block is reported.
TEST(KernelsRef, Int8EncoderAcrossBlocks) {
  SCOPED_TRACE(int8_have_avx512_vbmi() ? "with AVX-512 VBMI" : "without AVX-512 VBMI");
  for (size_t block : {64, 128, 256, 1024, 4096})
    for (size_t whole : {1, 2, 3, 5})
      for (int extra : {-17, -1, 0, 1, 15, 16}) {
        const size_t n = size_t(int(whole * block) + extra);
        const size_t blocks = (n + block - 1) / block;
        std::vector<float> r1 = random_normal(n, n + 5, 0.01f), r2 = r1;
        for (uint64_t step = 0; step < 3; ++step) {
          auto g = random_normal(n, 31 * n + step);
          for (size_t i = 0; i < n; ++i) g[i] *= std::pow(10.0f, float(int(i / block % 7) - 3));
          std::vector<uint8_t> o1(4 * blocks + n), o2(4 * blocks + n);
          ASSERT_TRUE(int8_encode(g.data(), r1.data(), n, block,
                                  reinterpret_cast<float*>(o1.data()), o1.data() + 4 * blocks));
          ASSERT_TRUE(int8_encode_ref(g.data(), r2.data(), n, block,
                                      reinterpret_cast<float*>(o2.data()), o2.data() + 4 * blocks));
          ASSERT_EQ(o1, o2) << "block " << block << " n " << n << " step " << step;
          ASSERT_EQ(0, bytes_cmp(r1.data(), r2.data(), n * sizeof(float)))
              << "residual, block " << block << " n " << n << " step " << step;
        }
      }
  // The AVX-512 encoder schedules step 1 by array size: overlapped up to 1 Mi values, with
  // software prefetch up to 4 Mi, block by block beyond.
  for (size_t n : {(size_t(1) << 20) + 333, (size_t(4) << 20) + 777}) {
    const size_t block = 512, blocks = (n + block - 1) / block;
    std::vector<float> r1 = random_normal(n, n + 11, 0.01f), r2 = r1;
    for (uint64_t step = 0; step < 2; ++step) {
      auto g = random_normal(n, n + 12 + step);
      for (size_t i = 0; i < n; ++i) g[i] *= std::pow(10.0f, float(int(i / block % 7) - 3));
      std::vector<uint8_t> o1(4 * blocks + n), o2(4 * blocks + n);
      ASSERT_TRUE(int8_encode(g.data(), r1.data(), n, block, reinterpret_cast<float*>(o1.data()),
                              o1.data() + 4 * blocks));
      ASSERT_TRUE(int8_encode_ref(g.data(), r2.data(), n, block,
                                  reinterpret_cast<float*>(o2.data()), o2.data() + 4 * blocks));
      ASSERT_EQ(o1, o2) << "n " << n << " step " << step;
      ASSERT_EQ(0, bytes_cmp(r1.data(), r2.data(), n * sizeof(float))) << "n " << n;
    }
  }
  for (size_t block : {64, 512})
    for (size_t n : {3 * block, 3 * block + 7})
      for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity()})
        for (size_t at : {size_t(0), block - 1, block, 2 * block + 5, n - 1}) {
          std::vector<float> g(n, -1.0f), r(n, 0.0f), absmax((n + block - 1) / block);
          std::vector<uint8_t> codes(n);
          g[at] = bad;
          EXPECT_FALSE(int8_encode(g.data(), r.data(), n, block, absmax.data(), codes.data()))
              << "block " << block << " n " << n << " at " << at;
        }
}

TEST(KernelsRef, Int8DecodesEveryCodeLikeTheTable) {
  // The fast decoder computes table[c] * absmax arithmetically: all 256 codes, both modes,
  // block maxima including 0 and extreme ones.
  // Both the dispatched decoder (AVX-512 VBMI byte tables where present) and the AVX2 one.
  const size_t block = 256, n = 4 * block + 8;
  std::vector<uint8_t> codes(n);
  for (size_t i = 0; i < n; ++i) codes[i] = uint8_t(i * 37 + i / block);
  const std::vector<float> absmax = {0.0f, 1.0f, 3.7e-30f, 1.7e30f, 0.3f};
  for (auto mode : {DecodeMode::kWrite, DecodeMode::kAccumulate}) {
    std::vector<float> a(n, 0.25f), b(n, 0.25f), c(n, 0.25f);
    int8_decode(absmax.data(), codes.data(), n, block, a.data(), mode);
    int8_decode_ref(absmax.data(), codes.data(), n, block, b.data(), mode);
    int8_decode_avx2(absmax.data(), codes.data(), n, block, c.data(), mode);
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), n * sizeof(float)));
    ASSERT_EQ(0, std::memcmp(c.data(), b.data(), n * sizeof(float)));
  }
}

TEST(KernelsRef, OnebitEncodeAndDecodeMatchReference) {
  for (size_t column : {32, 64, 512})
    for (size_t n : kLengths)
      for (float s : kScales) {
        size_t cols = (n + column - 1) / column, words = (n + 31) / 32;
        auto fast = [&](const float* g, float* r, size_t n, uint32_t* out) {
          return onebit_encode(g, r, n, column, reinterpret_cast<OnebitLevels*>(out),
                               out + 2 * cols);
        };
        auto ref = [&](const float* g, float* r, size_t n, uint32_t* out) {
          return onebit_encode_ref(g, r, n, column, reinterpret_cast<OnebitLevels*>(out),
                                   out + 2 * cols);
        };
        expect_same_encoding<uint32_t>(n, s, 2 * cols + words, fast, ref);
        auto g = random_normal(n, 5 * n + 2, s);
        std::vector<float> r(n, 0.0f);
        std::vector<OnebitLevels> lv(cols);
        std::vector<uint32_t> w(words);
        onebit_encode(g.data(), r.data(), n, column, lv.data(), w.data());
        for (auto mode : {DecodeMode::kWrite, DecodeMode::kAccumulate}) {
          std::vector<float> a(n, 0.25f), b(n, 0.25f);
          onebit_decode(lv.data(), w.data(), n, column, a.data(), mode);
          onebit_decode_ref(lv.data(), w.data(), n, column, b.data(), mode);
          ASSERT_EQ(0, bytes_cmp(a.data(), b.data(), n * sizeof(float)));
        }
      }
}

// The onebit encoders (dispatched, which is AVX-512 where the CPU has it, and AVX2) against the
// reference: levels, every sign word (with the bits past n), residuals and the returned flag.
struct OnebitRun {
  bool ok = false;
  std::vector<OnebitLevels> levels;
  std::vector<uint32_t> words;
  std::vector<float> r;
};
using OnebitEncodeFn = bool (*)(const float*, float*, size_t, size_t, OnebitLevels*, uint32_t*);

// A pointer `offset` floats past a 64-byte boundary inside buf (which has 16 floats of slack).
float* at_offset(std::vector<float>& buf, size_t offset) {
  auto addr = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + ((64 - addr % 64) % 64) / sizeof(float) + offset;
}

OnebitRun onebit_run(OnebitEncodeFn fn, const std::vector<float>& g, const std::vector<float>& r,
                     size_t column, size_t g_offset, size_t r_offset) {
  const size_t n = g.size(), cols = (n + column - 1) / column;
  std::vector<float> gbuf(n + 32), rbuf(n + 32);
  float* gp = at_offset(gbuf, g_offset);
  float* rp = at_offset(rbuf, r_offset);
  std::copy(g.begin(), g.end(), gp);
  std::copy(r.begin(), r.end(), rp);
  OnebitRun run;
  run.levels.assign(cols, OnebitLevels{-7.0f, 7.0f});  // stale bytes the kernel must overwrite
  run.words.assign((n + 31) / 32, 0xa5a5a5a5u);
  run.ok = fn(gp, rp, n, column, run.levels.data(), run.words.data());
  run.r.assign(rp, rp + n);
  return run;
}

// Returns the reference's run (the next step's residual).
OnebitRun expect_onebit_like_reference(const std::vector<float>& g, const std::vector<float>& r,
                                       size_t column, size_t g_offset = 0, size_t r_offset = 0) {
  OnebitRun want = onebit_run(onebit_encode_ref, g, r, column, g_offset, r_offset);
  const std::pair<const char*, OnebitEncodeFn> fast[] = {{"dispatched", onebit_encode},
                                                         {"avx2", onebit_encode_avx2}};
  for (const auto& [name, fn] : fast) {
    SCOPED_TRACE(std::string(name) + " n=" + std::to_string(g.size()) +
                 " column=" + std::to_string(column) + " offsets " + std::to_string(g_offset) +
                 "," + std::to_string(r_offset));
    const OnebitRun got = onebit_run(fn, g, r, column, g_offset, r_offset);
    EXPECT_EQ(got.ok, want.ok);
    EXPECT_EQ(0, bytes_cmp(got.levels.data(), want.levels.data(),
                           want.levels.size() * sizeof(OnebitLevels)));
    EXPECT_EQ(got.words, want.words);
    EXPECT_EQ(0, bytes_cmp(got.r.data(), want.r.data(), want.r.size() * sizeof(float)));
  }
  return want;
}

// Columns of 32 and 96 (not multiples of 64) up to 1024; lengths that end on, before and after
// column and word boundaries (the AVX-512 kernel interleaves whole columns and handles a short
// last column apart); g and r off 64-byte alignment by different amounts; three steps of error
// feedback.
TEST(KernelsRef, OnebitEncodersMatchReference) {
  SCOPED_TRACE(onebit_have_avx512() ? "with AVX-512" : "without AVX-512");
  const size_t lengths[] = {0,   1,   15,  16,   17,   31,   32,   33,  100,
                            511, 512, 513, 1000, 1023, 1024, 1025, 4099};
  for (size_t column : {32, 64, 96, 160, 512, 1024})
    for (size_t n : lengths)
      for (float scale : {1e-6f, 1.0f, 1e5f})
        for (auto [go, ro] : {std::pair<size_t, size_t>{0, 0}, {5, 3}, {8, 8}, {0, 13}}) {
          std::vector<float> r = random_normal(n, 11 + n, 0.1f * scale);
          for (uint64_t step = 0; step < 3; ++step) {
            const auto g = random_normal(n, 1000 * n + column + step, scale);
            r = expect_onebit_like_reference(g, r, column, go, ro).r;
            ASSERT_FALSE(::testing::Test::HasFailure());
          }
        }
}

// Zeros of both signs (s = -0 goes to the non-negative side, unlike its sign bit), all
// negative, all positive, subnormals, and magnitudes whose sums overflow to Inf while every s
// is finite (the encoders must still return true and the reference's bytes).
TEST(KernelsRef, OnebitEncodersOnZerosSignsAndOverflow) {
  const float big = 3e38f, tiny = 1e-40f;
  for (size_t column : {32, 96, 512})
    for (size_t n : {1, 31, 32, 33, 1000, 4099}) {
      auto fill = [n](auto f) {
        std::vector<float> v(n);
        for (size_t i = 0; i < n; ++i) v[i] = f(i);
        return v;
      };
      const std::vector<float> zeros(n, 0.0f), neg_zeros(n, -0.0f);
      const std::vector<std::pair<std::vector<float>, std::vector<float>>> cases = {
          {zeros, zeros},
          {neg_zeros, neg_zeros},  // s = -0
          {neg_zeros, zeros},      // s = +0
          {fill([](size_t i) { return -3.0f * float(1 + i % 5); }), zeros},
          {fill([](size_t i) { return 0.5f * float(1 + i % 7); }), zeros},
          {fill([](size_t i) { return i % 3 == 0 ? -0.0f : (i % 3 == 1 ? 0.0f : -1.0f); }),
           fill([](size_t i) { return i % 4 == 0 ? -0.0f : 0.0f; })},
          {fill([=](size_t i) { return i % 2 ? tiny : -tiny * float(i % 5); }), zeros},
          {fill([=](size_t) { return big; }), zeros},
          {fill([=](size_t) { return -big; }), zeros},
          {fill([=](size_t i) { return i % 3 ? big : -big; }), zeros},
      };
      for (size_t k = 0; k < cases.size(); ++k) {
        SCOPED_TRACE("case " + std::to_string(k));
        const OnebitRun want =
            expect_onebit_like_reference(cases[k].first, cases[k].second, column, 3, 8);
        EXPECT_TRUE(want.ok);
        ASSERT_FALSE(::testing::Test::HasFailure());
      }
    }
}

// A NaN (either sign) or Inf in g or r, in the first column, a middle one or the short last
// one: every encoder returns false and the reference's bytes. A -NaN among non-negatives is a
// column whose negatives' count is 0 while its sign bit is set.
TEST(KernelsRef, OnebitEncodersOnNonFinite) {
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  for (size_t column : {32, 96, 512})
    for (size_t n : {1, 33, 1000, 4099}) {
      const std::vector<std::vector<float>> bases = {
          std::vector<float>(n, 0.25f), std::vector<float>(n, -2.0f), random_normal(n, n + 5)};
      for (const auto& base : bases)
        for (float bad : {nan, -nan, inf, -inf})
          for (size_t at : {size_t(0), n / 2, n - 1})
            for (bool in_r : {false, true}) {
              SCOPED_TRACE("bad " + std::to_string(bad) + " at " + std::to_string(at) +
                           (in_r ? " in r" : " in g"));
              std::vector<float> g = base, r(n, 0.0f);
              (in_r ? r : g)[at] = bad;
              const OnebitRun want = expect_onebit_like_reference(g, r, column, 1, 0);
              EXPECT_FALSE(want.ok);
              ASSERT_FALSE(::testing::Test::HasFailure());
            }
    }
}

// The decoders (dispatched and AVX2) against the reference: every bit pattern's level, both
// modes, short last columns and words, out off 64-byte alignment; bits past n are ignored.
TEST(KernelsRef, OnebitDecodersMatchReference) {
  SCOPED_TRACE(onebit_have_avx512() ? "with AVX-512" : "without AVX-512");
  for (size_t column : {32, 96, 512})
    for (size_t n : {0, 1, 15, 16, 17, 31, 32, 33, 100, 512, 513, 1000, 4099}) {
      const size_t cols = (n + column - 1) / column, nwords = (n + 31) / 32;
      std::vector<OnebitLevels> levels(cols);
      const auto v = random_normal(2 * cols, n + column);
      for (size_t c = 0; c < cols; ++c) levels[c] = {-std::fabs(v[2 * c]), std::fabs(v[2 * c + 1])};
      if (cols > 0) levels[0] = {-0.0f, 0.0f};
      std::vector<uint32_t> words(nwords);
      for (size_t w = 0; w < nwords; ++w) words[w] = uint32_t(w * 2654435761u) ^ 0x5bd1e995u;
      const auto init = random_normal(n, 3 * n + 1);
      for (auto mode : {DecodeMode::kWrite, DecodeMode::kAccumulate})
        for (size_t offset : {0, 3, 8}) {
          SCOPED_TRACE("n=" + std::to_string(n) + " column=" + std::to_string(column) +
                       " offset=" + std::to_string(offset));
          std::vector<float> a(n + 32), b(n + 32), c(n + 32);
          float* pa = at_offset(a, offset);
          float* pb = at_offset(b, offset);
          float* pc = at_offset(c, offset);
          std::copy(init.begin(), init.end(), pa);
          std::copy(init.begin(), init.end(), pb);
          std::copy(init.begin(), init.end(), pc);
          onebit_decode(levels.data(), words.data(), n, column, pa, mode);
          onebit_decode_avx2(levels.data(), words.data(), n, column, pb, mode);
          onebit_decode_ref(levels.data(), words.data(), n, column, pc, mode);
          ASSERT_EQ(0, bytes_cmp(pa, pc, n * sizeof(float)));
          ASSERT_EQ(0, bytes_cmp(pb, pc, n * sizeof(float)));
          // Nothing written past n (at_offset leaves at least 9 floats of slack).
          for (float* p : {pa, pb}) ASSERT_EQ(0, bytes_cmp(p + n, pc + n, 8 * sizeof(float)));
        }
    }
}

TEST(KernelsRef, TopkMatchesFullSortReference) {
  for (size_t n : kLengths)
    for (double f : {0.01, 0.1, 0.5, 1.0}) {
      size_t k = topk_count(n, f);
      std::vector<float> scratch;
      auto fast = [&](const float* g, float* r, size_t n, TopkEntry* out) {
        return topk_encode(g, r, n, k, out, scratch);
      };
      auto ref = [&](const float* g, float* r, size_t n, TopkEntry* out) {
        return topk_encode_ref(g, r, n, k, out);
      };
      expect_same_encoding<TopkEntry>(n, 1.0f, k, fast, ref);
    }
  // Many ties: quantised inputs.
  std::vector<float> g(1000), r1(1000, 0.0f), r2(1000, 0.0f);
  for (size_t i = 0; i < g.size(); ++i) g[i] = float(int(i * 7919 % 11) - 5);
  std::vector<TopkEntry> a(100), b(100);
  std::vector<float> scratch;
  ASSERT_TRUE(topk_encode(g.data(), r1.data(), 1000, 100, a.data(), scratch));
  ASSERT_TRUE(topk_encode_ref(g.data(), r2.data(), 1000, 100, b.data()));
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), 100 * sizeof(TopkEntry)));
}

}  // namespace
}  // namespace loom::compress
