#include "loom/measure/codec_bench.h"

#include <malloc.h>

#include <algorithm>
#include <cstring>

#include "loom/compress/registry.h"
#include "loom/core/rng.h"
#include "loom/measure/bench_harness.h"
#include "loom/sync/allreduce/compressed_allreduce.h"

namespace loom::measure {

using namespace loom::compress;

void run_codec_bench(const CodecBenchOptions& o,
                     const std::function<void(const CodecBenchRow&)>& row) {
  const auto& names = o.codecs.empty() ? codec_names() : o.codecs;
  const size_t n = o.n;
  // glibc raises its mmap threshold the first time it frees a large mmapped block, so with the
  // default (adaptive) threshold the first codec's residual comes from fresh mmapped pages and
  // every later codec's from the heap, which measured up to 0.08 of vs_memcpy apart for the same
  // codec depending on where it ran in the list. A fixed threshold gives every codec the same
  // kind of memory.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  // memcpy copies the gradient into the buffer decode writes: the same bytes moved, and no
  // extra buffer to push the codecs' own data out of the last-level cache between rounds.
  // 64-byte aligned, as the model's flat gradient buffer (CpuBackend::allocate) and the codec
  // residuals are, so the codecs see the alignment training hands them.
  AlignedFloats grad(n), out(n);
  Rng rng(1, 0, RngPurpose::kTest);
  for (auto& x : grad) x = 1e-3f * rng.normal();  // gradient-like magnitudes
  const double gb = double(n) * sizeof(float) / 1e9;

  for (const auto& name : names) {
    // ConfigError for unknown names / bad params.
    auto codec = o.options ? make_codec(o.options(name)) : make_codec(name);
    CodecBenchRow r;
    r.codec = name;
    r.residual = residual_format_name(codec->residual_format());
    r.n = n;
    r.encoded_bytes = codec->encoded_bytes(n);
    r.wire_ratio = codec->wire_ratio(n);
    r.allreduce_wire_bytes = sync::compressed_allreduce_wire_bytes(*codec, n, o.world);
    r.fp32_allreduce_wire_bytes = sync::fp32_allreduce_wire_bytes(n, o.world);

    std::vector<uint32_t> packed((r.encoded_bytes + 3) / 4 + 1);
    std::span<std::byte> buf(reinterpret_cast<std::byte*>(packed.data()), r.encoded_bytes);
    CodecState st = codec->make_state(n, "bench");
    // One step from a zero residual for the error figure.
    codec->encode(grad, st, buf);
    codec->decode(buf, out, DecodeMode::kWrite);
    double e2 = 0, g2 = 0;
    for (size_t i = 0; i < n; ++i) {
      e2 += double(out[i] - grad[i]) * double(out[i] - grad[i]);
      g2 += double(grad[i]) * double(grad[i]);
    }
    r.decode_error_nmse = g2 > 0 ? e2 / g2 : 0;
    // The residual stays bounded under error feedback, so repeated encodes see the same kind
    // of data as training does.
    // memcpy, encode and decode one after the other in each round (bench_harness.h), so all
    // three see the same machine load; the fastest of each is the figure least disturbed by
    // other processes on a shared machine.
    const RoundTiming t =
        time_rounds({[&] { std::memcpy(out.data(), grad.data(), n * sizeof(float)); },
                     [&] { codec->encode(grad, st, buf); },
                     [&] { codec->decode(buf, out, DecodeMode::kWrite); }},
                    o.min_seconds);
    const double t_copy = t.fastest[0], t_enc = t.fastest[1], t_dec = t.fastest[2];
    r.reps = t.rounds;
    r.memcpy_gbs = gb / t_copy;
    r.encode_gbs = gb / t_enc;
    r.decode_gbs = gb / t_dec;
    r.roundtrip_gbs = gb / (t_enc + t_dec);
    r.vs_memcpy = t_copy / (t_enc + t_dec);
    row(r);
  }
}

}  // namespace loom::measure
