// What each gradient codec costs the model: bits on the wire per fp32 element, how it
// aggregates (summable in an allreduce, stripe exchange, or allgather), and its compute cost
// as passes over the fp32 gradient through GPU memory (or a measured GB/s from calibration).
// Every figure comes from the codec's record (compress/codec_kind.h): the model knows the
// codecs the registry knows, a registered one included, and names none of them.
#pragma once

#include <string>
#include <vector>

namespace loom::perf {

// The collective that carries a codec's payloads, from its record: summable payloads (and
// PowerSGD's linear factors) go through an allreduce, stripes through a reduce-scatter and
// all-gather of re-quantised stripes, sparse payloads through an all-gather.
enum class Aggregation {
  kAllreduce,       // summable as sent: fp32, fp16, bf16; PowerSGD's P and Q factors
  kStripeExchange,  // reduce-scatter + all-gather of re-quantised stripes (CNTK 1-bit, int8)
  kAllgather,       // every rank gets every rank's message (top-k: indices differ per rank)
};

struct CodecModel {
  std::string name;
  double bits_per_element = 32;  // wire bits per fp32 gradient element
  Aggregation aggregation = Aggregation::kAllreduce;
  int collectives = 1;                 // allreduces per bucket (PowerSGD: 2, for P and Q)
  double memory_passes = 0;            // fp32-sized passes through GPU memory (encode + decode)
  double extra_flops_per_element = 0;  // PowerSGD's matmuls
  bool error_feedback = false;         // keeps a residual buffer (fp32, one per parameter)
  std::string note;
  double ratio() const { return bits_per_element / 32.0; }
};

// A codec the registry knows (compress::codec_names()); InputError with close matches otherwise.
CodecModel codec_model(const std::string& name);
std::vector<std::string> codec_names();

}  // namespace loom::perf
