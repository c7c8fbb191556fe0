#include "loom/nn/graph/model_description.h"

#include "loom/nn/graph/model_zoo.h"

namespace loom::nn {

std::vector<LayerDescription> describe_layers(const ModelSpec& spec, const Shape& input_shape,
                                              int num_classes) {
  std::vector<LayerDescription> out;
  std::vector<Shape> shapes;
  for (const Node& node : build_model_nodes(spec, input_shape, num_classes)) {
    std::vector<Shape> in;
    LayerDescription d;
    for (int j : node.inputs) {
      in.push_back(j == kModelInput ? input_shape : shapes[size_t(j)]);
      d.in += numel(in.back());
    }
    shapes.push_back(node.layer->build_inputs(in));
    d.name = node.name;
    d.kind = node.layer->kind();
    d.out = numel(shapes.back());
    d.flops = node.layer->flops_per_sample();
    d.params = node.layer->num_params();
    out.push_back(d);
  }
  return out;
}

}  // namespace loom::nn
