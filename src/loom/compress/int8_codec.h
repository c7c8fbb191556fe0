// int8 dynamic tree (Dettmers, ICLR 2016, "8-Bit Approximations for Parallelism in Deep
// Learning"), normalised per block by the block's absolute maximum (as bitsandbytes does).
//
// A code byte is: bit 7 the sign; then, in the 7 magnitude bits, a run of e zero bits (a
// base-10 exponent, e = 0..6), an indicator 1 bit, and 6 - e bits of linear fraction that
// bisect [0.1, 1]. Read as an integer the 7 magnitude bits are an index mi = m_e + j with
// m_e = 2^(6-e) and j the fraction, and the magnitude is
//     value(mi) = 10^-e * (0.1 + 0.9 * (j + 1) / m_e),     value(0) = 0,
// so the fractions sit at the upper ends of their bins: level e's top is exactly 10^-e, the
// block maximum is sent exactly, and the levels tile (10^-7, 1] without gaps. Small
// magnitudes get exponent range (down to 1e-6 of the block maximum), large ones 6 bits of
// fraction. Decode is table[code] * absmax[block].
//
// Encoding picks the nearest magnitude arithmetically (no search): e = the number of the
// thresholds 0.1, 0.01, ..., 1e-6 at or above a = |s| / absmax; then t = a * 10^e lies in
// (0.1, 1], q = round((t - 0.1) * m_e / 0.9) in [0, m_e], and mi = m_e - 1 + q (q = 0 is the
// top of the next level down). That is the nearest table entry except below 1e-6, where the
// split between 0 and 1e-6 falls at 0.55e-6 instead of 0.5e-6.
//
// Packed layout for n elements and block size B (a power of two, codec.int8_block):
//     float absmax[ceil(n / B)];  uint8_t code[n];  zero padding to a multiple of 4 bytes.
// Bytes on the wire: n + 4 n / B (B = 512: 3.97x smaller than fp32).
#pragma once

#include <array>
#include <cstdint>

#include "loom/compress/codec.h"

namespace loom::compress {

inline constexpr size_t kInt8DefaultBlock = 512;
static_assert(sizeof(float) == 4 && sizeof(uint8_t) == 1);

// The 256 decoded values of the codes, for absmax = 1 (code 0x80 is -0).
const std::array<float, 256>& int8_dynamic_tree_table();

// Kernels: s = g + r; per block absmax; codes; r = s - decoded. false if any s is NaN/Inf.
// _ref is plain scalar; the other is AVX2 and matches it bit for bit.
bool int8_encode_ref(const float* g, float* r, size_t n, size_t block, float* absmax,
                     uint8_t* codes);
// Dispatches at run time: AVX-512 (F, BW, DQ, VBMI; level from the float's exponent, residual via
// the VBMI decoder's byte tables, three passes over each block in L1) where the CPU has it and
// block >= 64, else the AVX2 kernel. Both match _ref bit for bit.
bool int8_encode(const float* g, float* r, size_t n, size_t block, float* absmax, uint8_t* codes);
bool int8_encode_avx2(const float* g, float* r, size_t n, size_t block, float* absmax,
                      uint8_t* codes);
void int8_decode_ref(const float* absmax, const uint8_t* codes, size_t n, size_t block, float* out,
                     DecodeMode mode);
// Dispatches at run time: AVX-512 VBMI (byte-table lookups, 64 codes a step) where the CPU
// has it and block >= 64, else the AVX2 kernel below. Both match _ref bit for bit.
void int8_decode(const float* absmax, const uint8_t* codes, size_t n, size_t block, float* out,
                 DecodeMode mode);
void int8_decode_avx2(const float* absmax, const uint8_t* codes, size_t n, size_t block, float* out,
                      DecodeMode mode);
// Whether this CPU runs the AVX-512 paths (F, BW, DQ, VBMI; tests say which path they compared).
bool int8_have_avx512_vbmi();

class Int8Codec : public Codec {
 public:
  explicit Int8Codec(size_t block = kInt8DefaultBlock);
  std::string name() const override { return "int8"; }
  size_t encoded_bytes(size_t n) const override;
  size_t block() const { return block_; }

 protected:
  bool encode_impl(const float* grad, CodecState& state, std::byte* out) const override;
  void decode_impl(const std::byte* in, size_t n, float* out, DecodeMode mode) const override;
  void check_payload_impl(const std::byte* in, size_t n, const std::string& what) const override;

 private:
  size_t block_;
};

}  // namespace loom::compress
