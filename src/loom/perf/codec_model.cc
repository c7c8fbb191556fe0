#include "loom/perf/codec_model.h"

#include "loom/core/error.h"
#include "loom/perf/catalog.h"

namespace loom::perf {

std::vector<std::string> codec_names() {
  return {"fp32", "fp16", "bf16", "int8", "onebit", "topk", "powersgd"};
}

CodecModel codec_model(const std::string& name) {
  CodecModel c;
  c.name = name;
  if (name == "fp32") {
    c.note = "uncompressed";
  } else if (name == "fp16" || name == "bf16") {
    // Cast down on send, up on receive: read 4 + write 2, read 2 + write 4 bytes per element.
    c.bits_per_element = 16;
    c.memory_passes = 3;
    c.note = "cast to 16 bits (Horovod's fp16 compression)";
  } else if (name == "int8") {
    // Dettmers 2016 dynamic tree, absmax per 4096-block: 8 bits + 32/4096 for the scale.
    // Not summable: stripes are exchanged, decoded, summed, re-encoded and gathered.
    c.bits_per_element = 8 + 32.0 / 4096;
    c.aggregation = Aggregation::kStripeExchange;
    c.memory_passes = 6;  // absmax, encode, decode stripes, owner re-encode, final decode
    c.error_feedback = true;
    c.note = "8-bit dynamic tree (Dettmers, ICLR 2016)";
  } else if (name == "onebit") {
    // Seide et al. 2014: one bit per element plus two reconstruction floats per column
    // (columns of ~2048 entries).
    c.bits_per_element = 1 + 64.0 / 2048;
    c.aggregation = Aggregation::kStripeExchange;
    c.memory_passes = 8;  // residual add, column means, quantise + residual, decode, owner pass
    c.error_feedback = true;
    c.note = "1-bit with error feedback (Seide et al., 2014)";
  } else if (name == "topk") {
    // 1% of entries, each a 32-bit index and a 32-bit value; all-gathered (Lin et al. 2018).
    c.bits_per_element = 0.01 * 64;
    c.aggregation = Aggregation::kAllgather;
    c.memory_passes = 6;  // residual add, threshold selection (sampled), scatter back
    c.error_feedback = true;
    c.note = "top-1% with error feedback, all-gathered";
  } else if (name == "powersgd") {
    // Vogels et al. 2019, rank 4: a 1024 x 1024 layer sends (1024 + 1024) x 4 floats instead
    // of 1024^2: ratio ~0.008; two allreduces (P, then Q). Matmuls M Q, M^T P, P Q^T: 6 r
    // FLOPs per element.
    c.bits_per_element = 32 * 0.008;
    c.collectives = 2;
    c.memory_passes = 4;
    c.extra_flops_per_element = 6 * 4;
    c.error_feedback = true;
    c.note = "PowerSGD rank 4 (Vogels et al., NeurIPS 2019)";
  } else {
    throw InputError(unknown_name_message("codec", name, codec_names(), "codecs the model knows"));
  }
  return c;
}

}  // namespace loom::perf
