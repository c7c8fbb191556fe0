#include "loom/perf/codec_model.h"

#include "loom/compress/codec_kind.h"
#include "loom/compress/registry.h"
#include "loom/core/error.h"
#include "loom/perf/catalog.h"

namespace loom::perf {

std::vector<std::string> codec_names() {
  return compress::codec_names();
}

CodecModel codec_model(const std::string& name) {
  const compress::CodecKind* k = compress::find_codec_kind(name);
  if (!k)
    throw InputError(unknown_name_message("codec", name, codec_names(), "codecs the model knows"));
  CodecModel c;
  c.name = k->name;
  c.bits_per_element = k->wire_bits_per_element();
  if (k->summable || k->aggregation == compress::Aggregation::kLinear)
    c.aggregation = Aggregation::kAllreduce;
  else if (k->aggregation == compress::Aggregation::kGather)
    c.aggregation = Aggregation::kAllgather;
  else
    c.aggregation = Aggregation::kStripeExchange;
  c.collectives = k->cost.collectives;
  c.memory_passes = k->cost.memory_passes;
  c.extra_flops_per_element = k->cost.extra_flops_per_element;
  // The fp32 residual the memory model counts: kept by the lossy codecs that are not plain
  // casts (the casts' bf16 residual, two bytes a parameter, is left out of the model).
  c.error_feedback = k->lossy && !k->summable;
  c.note = k->reference.empty() ? k->summary : k->summary + " (" + k->reference + ")";
  return c;
}

}  // namespace loom::perf
