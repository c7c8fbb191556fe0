#include "loom/train/model_histograms.h"

#include <fmt/format.h>

#include <span>
#include <vector>

#include "loom/nn/io/model_file.h"

namespace loom::train {

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
