// The GPU codec kernels against the CPU reference codecs (compress/): same gradient, same
// starting residual, two encode steps (so error feedback is exercised), then the packed bytes,
// the residuals and decode (write and accumulate) must be bit-identical. Lengths include odd
// ones, a partial sign word and a partial column. CUDA builds only (cmake/cuda.cmake adds this
// file); skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "loom/compress/bf16_codec.h"
#include "loom/compress/cuda/codec_kernels.h"
#include "loom/compress/fp16_codec.h"
#include "loom/compress/int8_codec.h"
#include "loom/compress/onebit_codec.h"
#include "loom/compress/topk_codec.h"
#include "loom/tensor/cuda/cuda_backend.h"
#include "loom/tensor/cuda/cuda_check.h"
#include "tensor_cuda/gpu_compare.h"

namespace loom::test {
namespace {

using compress::Codec;
using compress::DecodeMode;

enum class Kind { kFp16, kBf16, kOnebit, kInt8, kTopk };

// `param`: 1-bit's column, int8's block; top-k's fraction is kTopkFraction.
constexpr double kTopkFraction = 0.01;

// With an fp32 residual, as the device kernels keep.
std::unique_ptr<Codec> cpu_codec(Kind k, size_t param) {
  std::unique_ptr<Codec> c;
  if (k == Kind::kFp16) c = std::make_unique<compress::Fp16Codec>();
  if (k == Kind::kBf16) c = std::make_unique<compress::Bf16Codec>();
  if (k == Kind::kInt8) c = std::make_unique<compress::Int8Codec>(param);
  if (k == Kind::kTopk) c = std::make_unique<compress::TopkCodec>(kTopkFraction);
  if (k == Kind::kOnebit) c = std::make_unique<compress::OnebitCodec>(param);
  c->set_residual_format(compress::ResidualFormat::kF32);
  return c;
}

int64_t topk_k(int64_t n) {
  return int64_t(compress::topk_count(size_t(n), kTopkFraction));
}

int64_t gpu_bytes(Kind k, int64_t n, int64_t param) {
  if (k == Kind::kOnebit) return cuda::onebit_encoded_bytes(n, param);
  if (k == Kind::kInt8) return cuda::int8_encoded_bytes(n, param);
  if (k == Kind::kTopk) return 8 * topk_k(n);
  return cuda::half_encoded_bytes(n);
}

// Top-k's scratch, grown as needed (the tests run one encode at a time).
void* topk_workspace(Backend& be, int64_t n) {
  static DeviceBuffer<uint8_t> ws;
  if (ws.size() < cuda::topk_workspace_bytes(n))
    ws = DeviceBuffer<uint8_t>(be, cuda::topk_workspace_bytes(n));
  return ws.data();
}

void gpu_encode(Kind k, cudaStream_t s, const float* g, float* r, int64_t n, int64_t param,
                void* out, int* bad) {
  if (k == Kind::kFp16) cuda::fp16_encode(s, g, r, n, static_cast<uint16_t*>(out), bad);
  if (k == Kind::kBf16) cuda::bf16_encode(s, g, r, n, static_cast<uint16_t*>(out), bad);
  if (k == Kind::kOnebit) cuda::onebit_encode(s, g, r, n, param, out, bad);
  if (k == Kind::kInt8) cuda::int8_encode(s, g, r, n, param, out, bad);
  if (k == Kind::kTopk)
    cuda::topk_encode(s, g, r, n, topk_k(n), out, topk_workspace(*Gpu::get().backend, n), bad);
}

void gpu_decode(Kind k, cudaStream_t s, const void* in, int64_t n, int64_t param, float* out,
                bool acc) {
  if (k == Kind::kFp16) cuda::fp16_decode(s, static_cast<const uint16_t*>(in), n, out, acc);
  if (k == Kind::kBf16) cuda::bf16_decode(s, static_cast<const uint16_t*>(in), n, out, acc);
  if (k == Kind::kOnebit) cuda::onebit_decode(s, in, n, param, out, acc);
  if (k == Kind::kInt8) cuda::int8_decode(s, in, n, param, out, acc);
  if (k == Kind::kTopk) cuda::topk_decode(s, in, topk_k(n), n, out, acc);
}

// `ties`: round the gradients to multiples of scale / 8, so many magnitudes are equal (top-k's
// tie rule, int8's exact levels).
void check_codec(Kind kind, int64_t n, int64_t column, float scale, bool ties = false) {
  auto& be = static_cast<CudaBackend&>(*Gpu::get().backend);
  const cudaStream_t stream = be.compute_stream();
  auto codec = cpu_codec(kind, size_t(column));
  const int64_t bytes = gpu_bytes(kind, n, column);
  ASSERT_EQ(size_t(bytes), codec->encoded_bytes(static_cast<size_t>(n)));
  auto state = codec->make_state(size_t(n), "bucket 0");
  const std::vector<float> r0 = random_floats(size_t(n), 40, -0.01f * scale, 0.01f * scale);
  state.residual.assign(r0.begin(), r0.end());
  if (ties) std::fill(state.residual.begin(), state.residual.end(), 0.0f);  // sums stay on the grid
  DeviceBuffer<float> dr =
      upload(be, std::vector<float>(state.residual.begin(), state.residual.end()));
  DeviceBuffer<uint8_t> dout(be, bytes);
  DeviceBuffer<int> dbad(be, 1);
  std::vector<std::byte> out(static_cast<size_t>(bytes));
  for (int step = 0; step < 2; ++step) {
    auto g = random_floats(size_t(n), 41 + step, -scale, scale);
    if (ties)
      for (float& x : g) x = std::round(x / scale * 8.0f) * (scale / 8.0f);
    auto dg = upload(be, g);
    codec->encode(g, state, out);
    gpu_encode(kind, stream, dg.data(), dr.data(), n, column, dout.data(), dbad.data());
    auto got = download(be, dout);
    std::vector<uint8_t> want(static_cast<size_t>(bytes));
    std::memcpy(want.data(), out.data(), out.size());
    EXPECT_BITS_EQ(got, want);
    EXPECT_BITS_EQ(download(be, dr),
                   std::vector<float>(state.residual.begin(), state.residual.end()));
    EXPECT_EQ(download(be, dbad)[0], 0);
  }
  for (bool acc : {false, true}) {
    std::vector<float> dec = random_floats(size_t(n), 50);
    auto ddec = upload(be, dec);
    codec->decode(out, dec, acc ? DecodeMode::kAccumulate : DecodeMode::kWrite);
    gpu_decode(kind, stream, dout.data(), n, column, ddec.data(), acc);
    EXPECT_BITS_EQ(download(be, ddec), dec);
  }
}

TEST(CudaCodecs, Fp16MatchesCpuCodecBytes) {
  LOOM_REQUIRE_GPU();
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(100001)}) check_codec(Kind::kFp16, n, 0, 1.0f);
  check_codec(Kind::kFp16, 4099, 0, 1e5f);   // clamped to +-65504
  check_codec(Kind::kFp16, 4099, 0, 1e-6f);  // subnormal halves
}

TEST(CudaCodecs, Bf16MatchesCpuCodecBytes) {
  LOOM_REQUIRE_GPU();
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(100001)}) check_codec(Kind::kBf16, n, 0, 1.0f);
  check_codec(Kind::kBf16, 4099, 0, 1e30f);
}

TEST(CudaCodecs, OnebitMatchesCpuCodecBytes) {
  LOOM_REQUIRE_GPU();
  for (int64_t n : {int64_t(1), int64_t(33), int64_t(512), int64_t(100001)})
    check_codec(Kind::kOnebit, n, 512, 1.0f);
  check_codec(Kind::kOnebit, 5000, 32, 1.0f);
  check_codec(Kind::kOnebit, 5000, 2048, 1.0f);
}

TEST(CudaCodecs, Int8MatchesCpuCodecBytes) {
  LOOM_REQUIRE_GPU();
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(513), int64_t(100001)})
    check_codec(Kind::kInt8, n, 512, 1.0f);
  check_codec(Kind::kInt8, 5003, 8, 1.0f);       // the smallest block
  check_codec(Kind::kInt8, 5003, 4096, 1e-30f);  // tiny magnitudes: the exponent range
  check_codec(Kind::kInt8, 4099, 512, 1.0f, true);
}

TEST(CudaCodecs, TopkMatchesCpuCodecBytesTiesIncluded) {
  LOOM_REQUIRE_GPU();
  for (int64_t n : {int64_t(1), int64_t(99), int64_t(2048), int64_t(100001), int64_t(1) << 21})
    check_codec(Kind::kTopk, n, 0, 1.0f);
  // Few distinct magnitudes: the k-th is shared by many entries; the lowest indices go.
  check_codec(Kind::kTopk, 100001, 0, 1.0f, true);
  check_codec(Kind::kTopk, 3000, 0, 0.0f);  // all zero: k zeros at indices 0..k-1
}

TEST(CudaCodecs, EncodersFlagNonFiniteInput) {
  LOOM_REQUIRE_GPU();
  auto& be = static_cast<CudaBackend&>(*Gpu::get().backend);
  const int64_t n = 1000;
  auto g = random_floats(size_t(n), 60);
  g[size_t(n - 3)] = std::numeric_limits<float>::quiet_NaN();
  auto dg = upload(be, g);
  for (Kind k : {Kind::kFp16, Kind::kBf16, Kind::kOnebit, Kind::kInt8, Kind::kTopk}) {
    DeviceBuffer<float> dr(be, n);
    DeviceBuffer<uint8_t> dout(be, gpu_bytes(k, n, 512));
    DeviceBuffer<int> dbad(be, 1);
    gpu_encode(k, be.compute_stream(), dg.data(), dr.data(), n, 512, dout.data(), dbad.data());
    EXPECT_EQ(download(be, dbad)[0], 1) << int(k);
  }
}

}  // namespace
}  // namespace loom::test
