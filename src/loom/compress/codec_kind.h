// What a codec is, in one record: its name, what it sends, how a sum over ranks is formed, what
// it costs, whether `auto` weighs it, its codec.* keys and how to build it. The rest of loom reads
// these records instead of naming codecs: the cost model (perf/codec_model.h), `auto`'s
// candidates, the allreduce strategy's defaults, the Python package and `--help-config`.
//
// A built-in codec's record lives in its own .cc file (fp16_codec_kind() in fp16_codec.cc) and
// is listed once in registry.cc; a codec outside the library (a test's) registers itself with a
// static CodecRegistrar. docs/architecture.md, "Adding a codec", walks through it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loom/compress/codec.h"
#include "loom/compress/codec_params.h"
#include "loom/core/config_value.h"

namespace loom::compress {

// What a codec costs beyond its bytes on the wire, as the performance model counts it.
struct CodecCost {
  double memory_passes = 0;            // fp32-sized passes over the gradient, encode + decode
  int collectives = 1;                 // collectives per bucket (PowerSGD: 2, for P and Q)
  double extra_flops_per_element = 0;  // arithmetic beyond the passes (PowerSGD's matmuls)
};

struct CodecKind {
  std::string name;
  std::string summary;    // one line: what it sends (help, Python, the cost model's note)
  std::string reference;  // where the method comes from ("" for plain casts)
  bool lossy = true;
  // Its payloads can be summed as sent, as an allreduce in their own type does (fp32, fp16,
  // bf16 over NCCL); the cost model then prices a plain allreduce.
  bool summable = false;
  Aggregation aggregation = Aggregation::kStripes;  // how loom's host path forms the sum
  CodecCost cost;
  bool device_kernels = false;  // has CUDA kernels; whether they were built: device_codec_built
  // Exact sums for the first steps of a run: this percentage of its steps, at most
  // warmup_max_steps (codec.warmup_steps overrides).
  int64_t warmup_percent = 0;
  int64_t warmup_max_steps = 0;
  // The allreduce strategy's defaults for it (plan/strategy_factory.cc):
  // at two ranks, all-gather instead of stripes (the same bytes, one quantisation, not two);
  bool gather_at_two_ranks = false;
  // buckets smaller than this travel exact (codec.min_bucket_kib's default);
  int64_t min_bucket_kib = 0;
  // each worker's velocity goes through it, DGC's momentum correction (on under SGD with
  // momentum unless sync.momentum_correction = false);
  bool momentum_correction = false;
  // it sends some entries in full, so sync.momentum_masking can clear their velocity.
  bool momentum_masking = false;
  // Whether codec = "auto" weighs it; if not, why (a clause for auto's log line).
  bool auto_candidate = true;
  std::string not_auto_reason;
  // Its own codec.* keys (the shared ones, codec.error_feedback and codec.residual, are in
  // codec_config_keys()); `make` is handed every one of them and reads no others.
  std::vector<CodecKey> keys;
  std::function<std::unique_ptr<Codec>(const CodecParams&)> make;

  // Bits on the wire per fp32 element at the default parameters, for a bucket of 2^20 elements.
  double wire_bits_per_element() const;
  // Every key of `keys` at its default.
  CodecParams default_params() const;
  // How loom sums it over `world` ranks unless told otherwise (codec.aggregation = "auto"):
  // its own aggregation, or gather at two ranks where gather_at_two_ranks says so.
  Aggregation default_aggregation(int world) const {
    return gather_at_two_ranks && world == 2 ? Aggregation::kGather : aggregation;
  }
};

// Every codec: the built-in ones in the order the benchmarks report them, then registered ones.
const std::vector<const CodecKind*>& codec_kinds();
// The names of the codecs whose record satisfies `pred`, in codec_kinds()' order.
std::vector<std::string> codec_names_where(const std::function<bool(const CodecKind&)>& pred);
// nullptr for a name no record has.
const CodecKind* find_codec_kind(const std::string& name);
// ConfigError naming `where` (a key and where it was set) and the known names.
const CodecKind& codec_kind(const std::string& name, const std::string& where = "codec");

// A codec defined outside the library registers itself from one file:
//   static const compress::CodecRegistrar kRegistered(my_codec_kind());
// A name already taken is an Error at start-up.
struct CodecRegistrar {
  explicit CodecRegistrar(CodecKind kind);
};

}  // namespace loom::compress
