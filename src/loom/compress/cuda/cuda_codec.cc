#include "loom/compress/cuda/cuda_codec.h"

#include "loom/compress/cuda/codec_kernels.h"
#include "loom/compress/int8_codec.h"
#include "loom/compress/onebit_codec.h"
#include "loom/compress/topk_codec.h"
#include "loom/core/error.h"
#include "loom/tensor/buffer.h"
#include "loom/tensor/cuda/cuda_backend.h"
#include "loom/tensor/cuda/cuda_check.h"

namespace loom::compress {
namespace {

enum class Kind { kFp16, kBf16, kInt8, kOnebit, kTopk };

class CudaCodec final : public DeviceCodec {
 public:
  CudaCodec(const Codec& codec, Kind kind, CudaBackend& be)
      : codec_(codec), kind_(kind), be_(be), bad_(be, 1) {
    be_.bind_device();
    try {
      void* pinned = nullptr;
      LOOM_CUDA_CHECK(cudaHostAlloc(&pinned, sizeof(int), cudaHostAllocDefault));
      bad_host_ = static_cast<int*>(pinned);
      LOOM_CUDA_CHECK(cudaEventCreateWithFlags(&bad_read_, cudaEventDisableTiming));
    } catch (...) {
      release();
      throw;
    }
  }
  ~CudaCodec() override { release(); }
  CudaCodec(const CudaCodec&) = delete;
  CudaCodec& operator=(const CudaCodec&) = delete;

  const Codec& host() const override { return codec_; }

  void encode(const float* g, float* r, size_t n, void* out) override {
    const cudaStream_t s = be_.stream();
    const int64_t len = int64_t(n);
    be_.bind_device();
    switch (kind_) {
      case Kind::kFp16:
        cuda::fp16_encode(s, g, r, len, static_cast<uint16_t*>(out), bad_.data());
        break;
      case Kind::kBf16:
        cuda::bf16_encode(s, g, r, len, static_cast<uint16_t*>(out), bad_.data());
        break;
      case Kind::kInt8:
        cuda::int8_encode(s, g, r, len, int64_t(static_cast<const Int8Codec&>(codec_).block()), out,
                          bad_.data());
        break;
      case Kind::kOnebit:
        cuda::onebit_encode(s, g, r, len, int64_t(static_cast<const OnebitCodec&>(codec_).column()),
                            out, bad_.data());
        break;
      case Kind::kTopk: {
        if (workspace_.size() < cuda::topk_workspace_bytes(len))
          workspace_ = DeviceBuffer<uint8_t>(be_, cuda::topk_workspace_bytes(len));
        cuda::topk_encode(s, g, r, len, topk_k(n), out, workspace_.data(), bad_.data());
        break;
      }
    }
  }

  void decode(const void* in, size_t n, float* out, bool accumulate) override {
    const cudaStream_t s = be_.stream();
    const int64_t len = int64_t(n);
    be_.bind_device();
    switch (kind_) {
      case Kind::kFp16:
        cuda::fp16_decode(s, static_cast<const uint16_t*>(in), len, out, accumulate);
        break;
      case Kind::kBf16:
        cuda::bf16_decode(s, static_cast<const uint16_t*>(in), len, out, accumulate);
        break;
      case Kind::kInt8:
        cuda::int8_decode(s, in, len, int64_t(static_cast<const Int8Codec&>(codec_).block()), out,
                          accumulate);
        break;
      case Kind::kOnebit:
        cuda::onebit_decode(s, in, len, int64_t(static_cast<const OnebitCodec&>(codec_).column()),
                            out, accumulate);
        break;
      case Kind::kTopk:
        cuda::topk_decode(s, in, topk_k(n), len, out, accumulate);
        break;
    }
  }

  // The flag into pinned memory and cleared, in the calling thread's stream order, then a wait
  // for that one event: the stream's other work is not waited for past that point, and the
  // copy is a real DMA (no staging through a pageable buffer).
  bool take_non_finite() override {
    const cudaStream_t s = be_.stream();
    be_.bind_device();
    LOOM_CUDA_CHECK(
        cudaMemcpyAsync(bad_host_, bad_.data(), sizeof(int), cudaMemcpyDeviceToHost, s));
    LOOM_CUDA_CHECK(cudaMemsetAsync(bad_.data(), 0, sizeof(int), s));
    LOOM_CUDA_CHECK(cudaEventRecord(bad_read_, s));
    LOOM_CUDA_CHECK(cudaEventSynchronize(bad_read_));
    return *bad_host_ != 0;
  }

 private:
  int64_t topk_k(size_t n) const {
    return int64_t(topk_count(n, static_cast<const TopkCodec&>(codec_).fraction()));
  }

  void release() noexcept {
    if (bad_read_) LOOM_CUDA_IGNORE(cudaEventDestroy(bad_read_));
    if (bad_host_) LOOM_CUDA_IGNORE(cudaFreeHost(bad_host_));
    bad_read_ = nullptr;
    bad_host_ = nullptr;
  }

  const Codec& codec_;
  Kind kind_;
  CudaBackend& be_;
  DeviceBuffer<int> bad_;
  DeviceBuffer<uint8_t> workspace_;
  int* bad_host_ = nullptr;  // pinned
  cudaEvent_t bad_read_ = nullptr;
};

bool kind_of(const std::string& name, Kind* kind) {
  if (name == "fp16") return *kind = Kind::kFp16, true;
  if (name == "bf16") return *kind = Kind::kBf16, true;
  if (name == "int8") return *kind = Kind::kInt8, true;
  if (name == "onebit") return *kind = Kind::kOnebit, true;
  if (name == "topk") return *kind = Kind::kTopk, true;
  return false;
}

}  // namespace

bool cuda_codec_exists(const std::string& name) {
  Kind k;
  return kind_of(name, &k);
}

std::unique_ptr<DeviceCodec> make_cuda_codec(const Codec& codec, CudaBackend& backend) {
  Kind kind;
  if (!kind_of(codec.name(), &kind)) return nullptr;
  return std::make_unique<CudaCodec>(codec, kind, backend);
}

}  // namespace loom::compress
