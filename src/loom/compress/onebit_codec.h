// 1-bit quantisation with error feedback (Seide, Fu, Droppo, Li & Yu, Interspeech 2014,
// "1-Bit Stochastic Gradient Descent and its Application to Data-Parallel Distributed
// Training of Speech DNNs"; as in CNTK).
//
// The input is cut into columns of C elements (codec.onebit_column, a multiple of 32; CNTK
// uses the columns of each gradient matrix, a flat bucket has no shape so loom uses fixed
// chunks). Per column, with s = g + residual, the two reconstruction values are the means of
// the negative entries and of the non-negative entries of s: the threshold-0 quantiser whose
// levels minimise the squared error within each side. Each element sends one bit (1 = s >= 0,
// so sign(0) = +1) and the residual keeps s - level. 32 signs per 32-bit word, bit k of word w
// is element 32 w + k.
//
// The sums behind the means are accumulated in 16 interleaved partial sums per side (element i
// of a column goes to lane i % 16), combined as combine8(l[j] + l[j + 8]), combine8(m) =
// ((m0+m1)+(m2+m3))+((m4+m5)+(m6+m7)): the scalar reference, the vector kernels and the CUDA
// kernel add in that same order, so their bytes are identical. (16 lanes: one AVX-512 add per
// 16 values and side; with 8, each 16 values needed two dependent adds and a shuffle each.)
//
// Packed layout for n elements:
//     OnebitLevels levels[ceil(n / C)];  uint32_t sign_words[ceil(n / 32)];
// Bytes on the wire: n / 8 + 8 n / C (C = 512: 28.4x smaller than fp32).
#pragma once

#include <cstdint>

#include "loom/compress/codec.h"

namespace loom::compress {

inline constexpr size_t kOnebitDefaultColumn = 512;

struct OnebitLevels {
  float neg;  // mean of the entries < 0 (0 if none)
  float pos;  // mean of the entries >= 0 (0 if none)
};
static_assert(sizeof(OnebitLevels) == 8);
static_assert(sizeof(uint32_t) == 4);

// Kernels: false if any s is NaN or Inf; column is a multiple of 32. _ref plain scalar; the
// others bit-identical to it: onebit_encode/decode dispatch at run time to AVX-512 (F, BW, DQ,
// VL) where the CPU has it, else to the AVX2 kernels, which the tests also call directly.
bool onebit_encode_ref(const float* g, float* r, size_t n, size_t column, OnebitLevels* levels,
                       uint32_t* words);
bool onebit_encode(const float* g, float* r, size_t n, size_t column, OnebitLevels* levels,
                   uint32_t* words);
bool onebit_encode_avx2(const float* g, float* r, size_t n, size_t column, OnebitLevels* levels,
                        uint32_t* words);
void onebit_decode_ref(const OnebitLevels* levels, const uint32_t* words, size_t n, size_t column,
                       float* out, DecodeMode mode);
void onebit_decode(const OnebitLevels* levels, const uint32_t* words, size_t n, size_t column,
                   float* out, DecodeMode mode);
void onebit_decode_avx2(const OnebitLevels* levels, const uint32_t* words, size_t n, size_t column,
                        float* out, DecodeMode mode);
// Whether onebit_encode/decode take the AVX-512 path on this CPU (tests say which they compared).
bool onebit_have_avx512();

class OnebitCodec : public Codec {
 public:
  explicit OnebitCodec(size_t column = kOnebitDefaultColumn);
  std::string name() const override { return "onebit"; }
  size_t encoded_bytes(size_t n) const override;
  size_t column() const { return column_; }

 protected:
  bool encode_impl(const float* grad, CodecState& state, std::byte* out) const override;
  void decode_impl(const std::byte* in, size_t n, float* out, DecodeMode mode) const override;
  void check_payload_impl(const std::byte* in, size_t n, const std::string& what) const override;

 private:
  size_t column_;
};

}  // namespace loom::compress
