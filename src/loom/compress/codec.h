// The codec contract (docs/architecture.md, "Codec contract").
//
// A codec turns n floats into a packed byte buffer of a size known up front and back.
// Error feedback is part of the contract, not an option of one codec (Seide et al. 2014,
// "1-Bit Stochastic Gradient Descent and its Application to Data-Parallel Distributed
// Training of Speech DNNs"):
//
//   encode(g, state, out):  s = g + state.residual        (the residual is added FIRST)
//                           out = Q(s)                    (the packed bytes)
//                           state.residual = s - D(Q(s))  (what was not sent stays behind;
//                                                          see ResidualFormat for its storage)
//   decode(in, out, mode):  out = D(in)  or  out += D(in)
//
// so over many steps the sum of decoded outputs tracks the sum of inputs: the error does not
// accumulate, it is only delayed. With error feedback disabled (codec.error_feedback = false,
// for the experiment that shows why it matters) the residual is treated as zero on entry.
//
// One codec instance is stateless and serves many buckets; each bucket's residual and any
// codec-specific state (PowerSGD's warm-started Q) live in a CodecState owned by whoever owns
// the bucket (the sync strategy). NaN or Inf entering encode() is a loom::NumericError naming
// the bucket and the element, never silently packed.
//
// Packed buffers are 4-byte aligned and encoded_bytes(n) is a multiple of 4, so encoded
// stripes can be laid end to end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "loom/compress/half.h"

namespace loom::compress {

enum class DecodeMode { kWrite, kAccumulate };

// How a codec's compressed sum over ranks is computed (compressed_allreduce.h).
enum class Aggregation {
  kStripes,  // two-stage: encode stripes to owners, owners sum + re-encode, allgather
  kLinear,   // the compression is linear in the input: plain allreduce of factors (PowerSGD)
  kGather,   // sparse: allgather every rank's encoding and sum them (top-k)
};

// "stripes", "linear" or "gather": the name `--help-config`, Python and the logs give it.
const char* aggregation_name(Aggregation a);

// One matrix of a bucket: the next rows * cols elements, row-major. A bucket that holds
// several layers is a list of them laid end to end (a layer's weight [out, in], its bias as
// [1, out]); codecs that exploit the shape (PowerSGD) work matrix by matrix.
struct MatrixDims {
  size_t rows = 0, cols = 0;
};

// Storage on 64-byte (cache-line) boundaries. The encoders stream the gradient and the
// residual side by side; the model's gradient buffers are 64-byte aligned, and a residual in a
// std::vector (16-byte aligned) would leave one of the two straddling cache lines on every
// 64-byte load, which costs the encoders much of their speed (docs/compress.md).
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64)));
  }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
};
using AlignedFloats = std::vector<float, CacheLineAllocator<float>>;
using AlignedBf16 = std::vector<uint16_t, CacheLineAllocator<uint16_t>>;

// How a state keeps its error-feedback residual.
//
// kBf16 stores each residual as bfloat16 (round to nearest even): the encoder then reads and
// writes 4 bytes less per element, and the residual takes half the memory. For the 16-bit
// codecs the residual is the rounding error of one value, at most 2^-11 (fp16) or 2^-8 (bf16)
// of it, so its own rounding loses at most 2^-20 or 2^-17 of the value per step: error feedback
// still carries nearly all of what was not sent, where without it each step loses up to 2^-11
// or 2^-8. Their encoders are bound by memory traffic, and the residual was 8 of the 14 bytes
// they move per element (`loom bench codec`, docs/compress.md). kF32 keeps it exact.
enum class ResidualFormat { kF32, kBf16 };
const char* residual_format_name(ResidualFormat f);  // "fp32", "bf16"

// Per-bucket state. Created by Codec::make_state(n, bucket); not shared between buckets.
struct CodecState {
  std::string bucket;  // named in error messages ("bucket 3", "bucket 3 owner stripe")
  size_t n = 0;        // elements this state encodes
  // Error feedback, zero at the start: n floats in `residual` (kF32) or n bfloat16 bit patterns
  // in `residual_bf16` (kBf16); the other one is empty.
  ResidualFormat residual_format = ResidualFormat::kF32;
  AlignedFloats residual;
  AlignedBf16 residual_bf16;
  // Codec-specific state: PowerSGD's warm-started Q (cols x rank). Checkpoints keep it.
  std::vector<float> aux;
  // Codec-specific scratch, rebuilt by every encode (top-k's magnitudes): not state, not saved.
  std::vector<float> scratch;
  // PowerSGD: the bucket as matrices (empty: the codec's default view of a flat bucket).
  std::vector<MatrixDims> matrices;
  uint64_t steps = 0;  // encodes so far

  // The residual as floats, whichever the format (checkpoints, tests, invariants).
  float residual_value(size_t i) const {
    return residual_format == ResidualFormat::kF32 ? residual[i]
                                                   : bf16_to_float_ref(residual_bf16[i]);
  }
  std::vector<float> residual_values() const;
  // Sets the residual from n floats; kBf16 rounds them (exact for what residual_values() gave).
  void set_residual_values(std::span<const float> values);
  void clear_residual();
  size_t residual_size() const {
    return residual_format == ResidualFormat::kF32 ? residual.size() : residual_bf16.size();
  }
};

class Codec {
 public:
  virtual ~Codec() = default;

  // "fp32", "fp16", "bf16", "int8", "onebit", "topk", "powersgd".
  virtual std::string name() const = 0;
  // Exact size of the encoding of n elements (a multiple of 4), so buffers are allocated once.
  virtual size_t encoded_bytes(size_t n) const = 0;
  // Bytes per element on the wire for an n-element bucket, relative to fp32's 4.
  double wire_ratio(size_t n) const {
    return n == 0 ? 1.0 : double(encoded_bytes(n)) / (4.0 * double(n));
  }
  virtual Aggregation aggregation() const { return Aggregation::kStripes; }

  virtual CodecState make_state(size_t n, const std::string& bucket) const;

  // Contract above. grad.size() == state.n; out.size() >= encoded_bytes(n), 4-byte aligned.
  // Throws NumericError (naming state.bucket) if grad + residual holds NaN or Inf.
  void encode(std::span<const float> grad, CodecState& state, std::span<std::byte> out) const;
  // in holds encoded_bytes(out.size()) bytes written by encode() for out.size() elements.
  // Trusted: the payloads of a run come from this process's or a peer rank's encode(), and the
  // hot path does not pay for checks. Bytes from anywhere else go through decode_checked().
  void decode(std::span<const std::byte> in, std::span<float> out, DecodeMode mode) const;

  // Whether `in` can be the encoding of n elements by this codec: exactly encoded_bytes(n)
  // bytes (a payload does not carry n, so the caller's n is what it is checked against), and
  // the codec's own invariants (check_payload_impl: top-k's indices below n and ascending,
  // finite scales and levels, zero padding). Throws InputError naming `what` and the problem.
  void check_payload(std::span<const std::byte> in, size_t n, const std::string& what) const;
  // decode() of a payload from outside loom (Python, a fuzzer): check_payload, then decode,
  // and every decoded value must be finite (finite factors can still overflow in a product).
  // On an InputError `out` is unchanged. `in` need not be aligned.
  void decode_checked(std::span<const std::byte> in, std::span<float> out, DecodeMode mode,
                      const std::string& what) const;

  bool error_feedback() const { return error_feedback_; }
  void set_error_feedback(bool on) { error_feedback_ = on; }

  // The residual format of the states make_state() creates. Codecs that can encode with a
  // bf16 residual say so (supports_bf16_residual); they start with kBf16, the others with kF32.
  virtual bool supports_bf16_residual() const { return false; }
  ResidualFormat residual_format() const { return residual_format_; }
  // Requires supports_bf16_residual() for kBf16 (the registry turns that into a ConfigError).
  void set_residual_format(ResidualFormat f);

 protected:
  // s = g + residual is formed by the implementation (residual may serve as scratch for s).
  // Returns false if any element of s is NaN or Inf (the caller throws).
  virtual bool encode_impl(const float* grad, CodecState& state, std::byte* out) const = 0;
  virtual void decode_impl(const std::byte* in, size_t n, float* out, DecodeMode mode) const = 0;
  // in: encoded_bytes(n) bytes, 4-byte aligned. Throws InputError (payload_error) where they
  // break an invariant of this codec's encoding; the default checks nothing beyond the size.
  virtual void check_payload_impl(const std::byte* in, size_t n, const std::string& what) const;

 private:
  bool error_feedback_ = true;
  ResidualFormat residual_format_ = ResidualFormat::kF32;
};

// Throws NumericError naming the codec, bucket and the first non-finite element of grad (or,
// if grad is finite, saying that grad + residual overflowed).
[[noreturn]] void throw_non_finite(const std::string& codec, const CodecState& state,
                                   std::span<const float> grad);

// The InputError of a payload that fails a check: "<what>: not a <codec> payload of <n>
// elements: <problem>".
[[noreturn]] void payload_error(const std::string& what, const std::string& codec, size_t n,
                                const std::string& problem);

// True where every byte of in[from, to) is zero (the padding an encoder writes).
bool zero_bytes(const std::byte* in, size_t from, size_t to);

inline size_t round_up4(size_t bytes) {
  return (bytes + 3) & ~size_t(3);
}

}  // namespace loom::compress
