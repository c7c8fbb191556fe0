#include "loom/nn/model_description.h"

#include "loom/nn/model_zoo.h"

namespace loom::nn {

std::vector<LayerDescription> describe_layers(const Config& cfg, const Shape& input_shape,
                                              int num_classes) {
  std::vector<LayerDescription> out;
  Shape shape = input_shape;
  for (const auto& layer : build_layers(cfg, input_shape, num_classes)) {
    LayerDescription d;
    d.kind = layer->kind();
    d.in = numel(shape);
    shape = layer->build(shape);
    d.out = numel(shape);
    d.flops = layer->flops_per_sample();
    d.params = layer->num_params();
    out.push_back(d);
  }
  return out;
}

}  // namespace loom::nn
