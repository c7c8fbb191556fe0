// What `loom bench codec` measures: per codec, single thread, encode and decode throughput
// and bytes on the wire, with memcpy of the same buffer timed in the same rounds (memcpy,
// encode, decode, repeated; the fastest of each is reported), so the ratio holds on a
// shared, noisy machine.
//
// Throughput is counted in fp32 input bytes: GB/s = 4 n / seconds. memcpy copies the 4 n
// bytes of the gradient. roundtrip = 4 n / (t_encode + t_decode); vs_memcpy = roundtrip /
// memcpy, i.e. t_memcpy / (t_encode + t_decode) (target >= 0.5 for fp16, bf16, int8, onebit).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "loom/compress/codec_options.h"

namespace loom::measure {

struct CodecBenchOptions {
  size_t n = 1863690;               // the default MLP's gradient (784-1024-1024-10)
  std::vector<std::string> codecs;  // empty: all
  double min_seconds = 0.25;        // per codec: rounds run for 3x this
  int world = 2;                    // for the compressed allreduce wire bytes
  // Each codec's settings and parameters (a command reads them from codec.* keys); unset: the
  // defaults of its record.
  std::function<compress::CodecOptions(const std::string& name)> options;
};

struct CodecBenchRow {
  std::string codec;
  std::string residual;  // how the error-feedback residual is stored: "fp32" or "bf16"
  size_t n = 0;
  size_t encoded_bytes = 0;
  double wire_ratio = 0;            // encoded bytes / fp32 bytes, one bucket
  size_t allreduce_wire_bytes = 0;  // per rank per step, compressed allreduce over `world`
  size_t fp32_allreduce_wire_bytes = 0;
  double memcpy_gbs = 0, encode_gbs = 0, decode_gbs = 0, roundtrip_gbs = 0;
  double vs_memcpy = 0;
  double decode_error_nmse = 0;  // one step on N(0,1) data, for orientation
  int reps = 0;
};

// Runs every codec and calls `row` as each finishes.
void run_codec_bench(const CodecBenchOptions& o,
                     const std::function<void(const CodecBenchRow&)>& row);

}  // namespace loom::measure
