// PowerSGD (Vogels, Karimireddy & Jaggi, NeurIPS 2019, "PowerSGD: Practical Low-Rank Gradient
// Compression for Distributed Optimization"), rank r, with error feedback and warm start.
//
// A bucket of n floats is seen as a row-major matrix M of rows x cols (cols = codec.
// powersgd_cols, or ceil(sqrt(n)) when 0; rows = ceil(n / cols); the missing tail of the last
// row counts as zeros). One step, with M = g + residual and Q (cols x r) kept from the last
// step (warm start; random normal at the start, identical on every rank):
//     P = M Q;  orthonormalise the columns of P (Gram-Schmidt);  Q = M^T P;
//     M_hat = P Q^T;  residual = M - M_hat.
// The rank is min(r, rows, cols). On one worker the encoding is [P (rows x r), Q (cols x r)]
// as floats. Across workers the algorithm is linear, so it runs on plain allreduce:
// P = sum_i M_i Q is allreduced before the orthonormalisation and Q = sum_i M_i^T P after it
// (powersgd_allreduce in compressed_allreduce.h); each worker keeps M_i - P (M_i^T P)^T, so the
// residuals still sum to exactly what the aggregate did not send.
//
// A flat bucket has no shape, and a wrong one destroys the low-rank structure that PowerSGD
// relies on: a layer's weight gradient sum_b dy_b x_b^T has low rank as an [out, in] matrix,
// but rows cut at any other width mix parts of different output rows. So the compressed
// allreduce takes the bucket's real matrices (CodecState::matrices: each layer's weight
// [out, in] and its bias as [1, out]) and runs one power step per matrix; a [1, c] matrix
// gets rank 1 and is sent exactly (c + 1 floats), as Vogels et al. send 1-D tensors
// uncompressed. The single-worker encode()/decode() below use the default view (one
// rows x cols matrix as above).
//
// Packed layout: float P[rows * r]; float Q[cols * r] (per matrix: all P, then all Q).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "loom/compress/codec.h"

namespace loom::compress {

inline constexpr size_t kPowerSgdDefaultRank = 4;

struct MatrixShape {
  size_t rows = 0, cols = 0, rank = 0;
};
// The shape a bucket of n elements takes (cols_hint 0: ceil(sqrt(n))).
MatrixShape powersgd_shape(size_t n, size_t cols_hint, size_t rank);

// One matrix of a bucket's layout and where its factors sit: elements [offset, offset + n) of
// the bucket, P at p in the concatenated P factors, Q at q in the concatenated Q factors
// (and in CodecState::aux, the warm start).
struct PowerSgdBlock {
  size_t offset = 0, n = 0;
  MatrixShape s;
  size_t p = 0, q = 0;
};
struct PowerSgdPlan {
  std::vector<PowerSgdBlock> blocks;
  size_t p_floats = 0, q_floats = 0;
};

// Building blocks, on M = the first n elements of a rows x cols row-major matrix.
// P = M Q (p: rows x r, q: cols x r, both row-major).
void powersgd_mul_q(const float* m, size_t n, const MatrixShape& s, const float* q, float* p);
// Q = M^T P.
void powersgd_mul_p(const float* m, size_t n, const MatrixShape& s, const float* p, float* q);
// out = P Q^T (first n elements), written or accumulated; with sign -1, subtracted.
void powersgd_expand(const float* p, const float* q, size_t n, const MatrixShape& s, float* out,
                     DecodeMode mode, float sign = 1.0f);
// Modified Gram-Schmidt on the columns of p (rows x r); a zero column stays zero.
void orthonormalise_columns(float* p, size_t rows, size_t rank);
// Columns of q (cols x r) that are all zero are refilled from a normal stream derived from
// `key` (identical on every rank), so a zero gradient does not stall the warm start.
void refill_zero_columns(float* q, size_t cols, size_t rank, uint64_t key);

// Reference for one single-worker step in double precision, straight from the formulas:
// returns M_hat in `approx` (n) and the new Q; tests compare the float path with it.
void powersgd_step_ref(const float* m, size_t n, const MatrixShape& s, const float* q_in,
                       float* approx, float* q_out);

class PowerSgdCodec : public Codec {
 public:
  PowerSgdCodec(size_t rank = kPowerSgdDefaultRank, size_t cols = 0, uint64_t seed = 0x5eed);
  std::string name() const override { return "powersgd"; }
  size_t encoded_bytes(size_t n) const override;
  Aggregation aggregation() const override { return Aggregation::kLinear; }
  // Allocates the residual and Q, random normal from (seed, bucket name).
  CodecState make_state(size_t n, const std::string& bucket) const override;
  // The same for a bucket made of `matrices` (their sizes must add up to n); empty: the
  // default view. Only compressed_allreduce uses such states.
  CodecState make_state(size_t n, const std::string& bucket,
                        std::span<const MatrixDims> matrices) const;
  MatrixShape shape(size_t n) const { return powersgd_shape(n, cols_, rank_); }
  // The matrices of a state, with their ranks min(r, rows, cols) and factor offsets.
  PowerSgdPlan plan(const CodecState& state) const;
  // Seeds the zero-column refill of block `block` of a state (the same on every rank).
  uint64_t refill_key(const CodecState& state, size_t block = 0) const;

 protected:
  bool encode_impl(const float* grad, CodecState& state, std::byte* out) const override;
  void decode_impl(const std::byte* in, size_t n, float* out, DecodeMode mode) const override;
  void check_payload_impl(const std::byte* in, size_t n, const std::string& what) const override;

 private:
  size_t rank_, cols_;
  uint64_t seed_;
};

}  // namespace loom::compress
