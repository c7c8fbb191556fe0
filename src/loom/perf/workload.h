// Workloads: what one training sample costs. Layers are listed in forward order with their
// parameter count and forward FLOPs per sample, so the cost model can tell when each
// bucket of gradients becomes ready during backward (backward runs the layers in reverse).
// Backward FLOPs = 2 x forward (gradients with respect to inputs and to weights).
#pragma once

#include <string>
#include <vector>

namespace loom {
class Config;
}

namespace loom::perf {

struct LayerCost {
  std::string name;
  double params = 0;     // trainable parameters
  double fwd_flops = 0;  // per sample, 2 x multiply-adds
};

struct Workload {
  std::string name;
  std::string source;  // where the published figures come from
  std::vector<LayerCost> layers;
  double activation_bytes = 0;  // per sample, stored for backward, at fp32
  double input_bytes = 0;       // per sample as read from storage
  int64_t default_batch = 64;   // per GPU, when the user gives none

  double params() const;
  double fwd_flops() const;
  double bwd_flops() const { return 2 * fwd_flops(); }
  double train_flops() const { return 3 * fwd_flops(); }
  double param_bytes() const { return 4 * params(); }  // fp32
};

// Named reference workloads (resnet50, resnet101, inception3, vgg16, alexnet, bert-large,
// gpt2, gpt2-xl, cntk-dnn); InputError with close matches for an unknown name.
Workload reference_workload(const std::string& name);
std::vector<std::string> reference_workload_names();

// The workload of a loom model config: `model = "mlp"` (mlp.hidden = [...]) or "cnn".
// Input 28x28x1, 10 classes (the shapes of loom's nn zoo).
Workload workload_from_config(const Config& cfg, const std::string& name = "config");

// A name from reference_workload_names(), or a path to a loom model config (*.toml).
Workload resolve_workload(const std::string& name_or_path);

}  // namespace loom::perf
