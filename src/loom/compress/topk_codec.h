// Top-k sparsification with error feedback (as in Deep Gradient Compression, Lin et al., ICLR
// 2018, without its momentum tricks): send the k entries of s = g + residual with the largest
// magnitude, exactly; keep everything else as the residual. k = ceil(fraction * n), at least 1
// (codec.topk_fraction). Ties in magnitude go to the lower index, so the selection is a
// function of s alone and every implementation sends the same bytes.
//
// Packed layout: TopkEntry entry[k], sorted by index. 8 k bytes on the wire (fraction 0.01:
// 50x smaller than fp32). Not allreduce-compatible (sums of sparse sets are not sparse):
// aggregated by allgather (compressed_allreduce.h).
#pragma once

#include <cstdint>
#include <vector>

#include "loom/compress/codec.h"

namespace loom::compress {

struct TopkEntry {
  uint32_t index;
  float value;
};
static_assert(sizeof(TopkEntry) == 8);

inline constexpr double kTopkDefaultFraction = 0.01;

size_t topk_count(size_t n, double fraction);

// Kernels: false if any s is NaN or Inf. _ref sorts all indices; the other finds the k-th
// magnitude with nth_element (scratch: n floats) and then scans once. Same bytes.
bool topk_encode_ref(const float* g, float* r, size_t n, size_t k, TopkEntry* out);
bool topk_encode(const float* g, float* r, size_t n, size_t k, TopkEntry* out,
                 std::vector<float>& scratch);
void topk_decode(const TopkEntry* in, size_t k, size_t n, float* out, DecodeMode mode);

class TopkCodec : public Codec {
 public:
  explicit TopkCodec(double fraction = kTopkDefaultFraction);
  std::string name() const override { return "topk"; }
  size_t encoded_bytes(size_t n) const override {
    return topk_count(n, fraction_) * sizeof(TopkEntry);
  }
  Aggregation aggregation() const override { return Aggregation::kGather; }
  double fraction() const { return fraction_; }

 protected:
  bool encode_impl(const float* grad, CodecState& state, std::byte* out) const override;
  void decode_impl(const std::byte* in, size_t n, float* out, DecodeMode mode) const override;
  void check_payload_impl(const std::byte* in, size_t n, const std::string& what) const override;

 private:
  double fraction_;
};

}  // namespace loom::compress
