#include "loom/train/model_histograms.h"

#include <fmt/format.h>

#include <span>
#include <vector>

#include "loom/core/config_refusal.h"
#include "loom/nn/io/model_file.h"

namespace loom::train {

HistogramOptions read_histogram_options(const Config& cfg) {
  HistogramOptions o;
  o.enabled = cfg.get_bool("train.histograms", false);
  o.every = cfg.get_int("train.histogram_every", 100, 1, int64_t(1) << 40);
  if (!o.enabled)
    refuse_unless_default(cfg, "train.histogram_every", int64_t(100),
                          fmt::format("spaces the histograms of train.histograms, which is "
                                      "false ({})",
                                      cfg.where("train.histograms")));
  if (o.enabled && cfg.get_string("output.dir", "runs/latest").empty())
    refuse_key(cfg, "train.histograms",
               fmt::format("histograms go to output.dir/tb/, and output.dir is \"\" ({})",
                           cfg.where("output.dir")));
  return o;
}

void write_model_histograms(TensorBoardWriter& tb, nn::Model& model, int64_t step) {
  const size_t n = size_t(model.num_params());
  std::vector<float> params(n), grads(n);
  model.backend().copy_to_host(params.data(), model.params(), n * sizeof(float));
  model.backend().copy_to_host(grads.data(), model.grads(), n * sizeof(float));
  for (const nn::ModelTensor& t : nn::model_tensors(model)) {
    if (t.state || t.count == 0) continue;
    const std::span<const float> w(params.data() + t.offset, size_t(t.count));
    const std::span<const float> g(grads.data() + t.offset, size_t(t.count));
    tb.histogram("weights/" + t.name, step, w);
    tb.histogram("gradients/" + t.name, step, g);
  }
}

}  // namespace loom::train
