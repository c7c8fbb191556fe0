// Workloads: what one training sample costs. Layers are listed in forward order with their
// parameter count and forward FLOPs per sample, so the cost model can tell when each
// bucket of gradients becomes ready during backward (backward runs the layers in reverse).
// Backward FLOPs = 2 x forward (gradients with respect to inputs and to weights).
#pragma once

#include <string>
#include <vector>

namespace loom::perf {

// Convolutions and the other matrix products run in different math by default (PyTorch:
// convolutions in TF32, matmuls in fp32; gpu_roofline.h).
enum class ProductKind { kGemm, kConv };

struct LayerCost {
  std::string name;
  double params = 0;     // trainable parameters
  double fwd_flops = 0;  // per sample, 2 x multiply-adds
  // Share of fwd_flops in stride-1 3x3 convolutions, which cuDNN runs as Winograd
  // F(2x2, 3x3) with 2.25x fewer multiplies (compute_model.h).
  double winograd_share = 0;
  ProductKind kind = ProductKind::kGemm;
  // Share of fwd_flops in convolutions that read the image, and the image's channels (3 for
  // RGB): tensor cores pad so few input channels (gpu_roofline.h).
  double image_input_share = 0;
  double image_channels = 3;
};

// Elementwise traffic of one tensor size: `bytes` per sample (at fp32) moved by the layers whose
// largest tensor holds `values` per sample. The roofline counts what of it the L2 cache serves
// when a step's tensor of that size fits there (gpu_roofline.h, "L2 cache").
struct TensorTraffic {
  double values = 0;
  double bytes = 0;
};

struct Workload {
  std::string name;
  std::string source;  // where the published figures come from
  std::vector<LayerCost> layers;
  double activation_bytes = 0;  // per sample, stored for backward, at fp32
  double input_bytes = 0;       // per sample as read from storage
  int64_t default_batch = 64;   // per GPU, when the user gives none
  // Per sample, bytes read + written by the ops between GEMMs (bias, activations, dropout,
  // their backward, bias gradients, loss), forward and backward; 0 when not computed. The
  // host model (host_model.h) times them at a measured rate.
  double elementwise_bytes = 0;
  // The part of it that mixed precision keeps in fp32 (autocast's layer_norm, softmax, losses).
  double fp32_elementwise_bytes = 0;
  // elementwise_bytes by the size of the tensors it moves (summing to it where listed; traffic
  // not listed is never counted as held in L2).
  std::vector<TensorTraffic> elementwise_by_tensor;
  // GPU kernels one training step launches, forward and backward (gpu_roofline.h); 0 = not
  // counted.
  double kernels = 0;
  // Per sample, the values every convolution reads (its input) and writes (its output): what
  // NCHW's transposes move (gpu_roofline.h).
  double conv_io_values = 0;
  bool first_layer_input_grad = true;  // loom's layers skip the input's gradient
  // Samples a published training run of the model takes (the advisor's time to train); 0 =
  // none on record.
  double train_samples = 0;
  std::string train_samples_source;

  double params() const;
  double fwd_flops() const;
  double bwd_flops() const { return 2 * fwd_flops(); }
  double train_flops() const { return 3 * fwd_flops(); }
  // The GEMM FLOPs one step actually runs: forward, weight gradients, and input gradients
  // for every layer but the first when the framework skips the input's gradient.
  double step_flops() const;
  double param_bytes() const { return 4 * params(); }  // fp32
};

// A GPT-style decoder as a validation case or a user describes it: `params` in total, the
// embedding (and an untied output matrix) included.
struct DecoderShape {
  std::string name;
  int layers = 0, heads = 0;
  double d_model = 0, seq = 0, vocab = 0, params = 0;
  bool untied_output = false;  // the output projection has its own matrix (Llama)
  // The framework's fused attention (FlashAttention: scores never reach memory) and fused
  // softmax cross-entropy.
  bool fused = false;
  bool recompute = false;  // activation checkpointing: each block's forward runs twice
};
Workload decoder_workload(const DecoderShape& s);

// Named reference workloads (resnet50, resnet50-v1, resnet101, inception3, vgg16, alexnet,
// alexnet-tf, bert-large, gpt2, gpt2-xl, cntk-dnn); InputError with close matches for an unknown
// name.
Workload reference_workload(const std::string& name);
std::vector<std::string> reference_workload_names();

// One layer of a loom model graph, as the cli reads it from nn (perf knows no nn).
struct GraphLayer {
  std::string name, kind;  // "s1b1_conv1", "Conv2d"
  double in = 0, out = 0;  // elements per sample in (all inputs) and out
  double params = 0;
  double fwd_flops = 0;  // per sample
};

// Any loom model graph: Linear and Conv2d layers as GEMMs with the parameters and FLOPs the
// layers count, activations stored for backward = every layer's output, and the other layers
// (activations, BatchNorm, pooling, Add, ...) as elementwise traffic: reading their inputs and
// writing their outputs forward, and about twice that backward, 4 bytes a value. Winograd is not
// assumed.
Workload workload_from_graph(const std::string& name, const std::vector<GraphLayer>& layers,
                             double input_bytes, int64_t default_batch);

// The built-in networks of loom's model zoo on Fashion-MNIST's shapes (input 28x28x1, 10
// classes): the MLP with these hidden widths and dropout, and the CNN at its default shape
// (plan/workload_reader.h reads them from a config).
Workload mlp_workload(const std::vector<int64_t>& hidden, double dropout, int64_t batch,
                      const std::string& name);
Workload cnn_workload(int64_t batch, const std::string& name);

// Bytes one sample moves through an MLP's layer ops between GEMMs, forward and backward
// (Workload::elementwise_bytes); widths = input, hidden..., classes.
double mlp_elementwise_bytes(const std::vector<double>& widths, double dropout);
// The same by tensor size (Workload::elementwise_by_tensor): each hidden layer's, the logits'.
std::vector<TensorTraffic> mlp_elementwise_by_tensor(const std::vector<double>& widths,
                                                     double dropout);

}  // namespace loom::perf
