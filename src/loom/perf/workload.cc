#include "loom/perf/workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>

#include "loom/core/error.h"
#include "loom/perf/catalog.h"

namespace loom::perf {

double Workload::params() const {
  double s = 0;
  for (const auto& l : layers) s += l.params;
  return s;
}

double Workload::fwd_flops() const {
  double s = 0;
  for (const auto& l : layers) s += l.fwd_flops;
  return s;
}

double Workload::step_flops() const {
  double s = train_flops();
  if (!first_layer_input_grad && !layers.empty()) s -= layers.front().fwd_flops;
  return s;
}

namespace {

constexpr double kM = 1e6, kG = 1e9;
// ImageNet ILSVRC-2012 train: ~138 GB of JPEG over 1,281,167 images = ~108 KB per image.
constexpr double kImageNetJpegBytes = 108e3;
constexpr double kImageNetTrainImages = 1281167;
// Devlin et al. 2019, appendix A.2: BERT pre-training runs 1,000,000 steps of 256 sequences.
constexpr double kBertPretrainSequences = 256e6;
constexpr const char* kBertPretrainSource =
    "BERT pre-training: 1,000,000 steps of 256 sequences (Devlin et al. 2019)";

// Traffic between the products and kernels per step of a reference CNN, from torchvision's
// definitions by scripts/workload-traffic (its rules there; the TensorFlow variants as that
// script builds them): bytes per sample at fp32, the same traffic by tensor size (values per
// sample, bytes per sample: what the L2 cache may hold, gpu_roofline.h), and the values its
// convolutions read and write per sample (Workload::conv_io_values).
struct CnnTraffic {
  double bytes;
  double kernels;
  double conv_io;
  std::vector<TensorTraffic> by_tensor;
};
CnnTraffic resnet50_traffic() {
  return {694.0e6,
          407,
          21.78e6,
          {{0.02509e6, 6.523e6},
           {0.05018e6, 28.7e6},
           {0.1004e6, 68.66e6},
           {0.2007e6, 171e6},
           {0.4014e6, 155.7e6},
           {0.8028e6, 263.3e6}}};
}
CnnTraffic resnet50_v1_traffic() {
  return {666.6e6,
          407,
          20.72e6,
          {{0.02509e6, 7.827e6},
           {0.05018e6, 31.31e6},
           {0.1004e6, 68.66e6},
           {0.2007e6, 160.6e6},
           {0.4014e6, 134.9e6},
           {0.8028e6, 263.3e6}}};
}
CnnTraffic resnet101_traffic() {
  return {1042.0e6,
          798,
          32.01e6,
          {{0.02509e6, 6.523e6},
           {0.05018e6, 117.4e6},
           {0.1004e6, 68.66e6},
           {0.2007e6, 430.3e6},
           {0.4014e6, 155.7e6},
           {0.8028e6, 263.3e6}}};
}
CnnTraffic inception3_traffic() {
  return {
      565.7e6, 707, 23.11e6, {{0.002048e6, 0.03686e6}, {0.01229e6, 1.917e6}, {0.02048e6, 3.195e6},
                              {0.02458e6, 15.34e6},    {0.02774e6, 1.443e6}, {0.02867e6, 2.982e6},
                              {0.03699e6, 11.54e6},    {0.0392e6, 2.038e6},  {0.04624e6, 28.85e6},
                              {0.05549e6, 75.02e6},    {0.0588e6, 9.173e6},  {0.0784e6, 48.92e6},
                              {0.08192e6, 1.966e6},    {0.111e6, 5.771e6},   {0.1176e6, 42.81e6},
                              {0.1311e6, 5.259e6},     {0.222e6, 26.53e6},   {0.2352e6, 3.763e6},
                              {0.3136e6, 7.526e6},     {0.3528e6, 16.85e6},  {0.4263e6, 22.17e6},
                              {0.6915e6, 35.96e6},     {0.7104e6, 36.94e6},  {0.9679e6, 65.71e6},
                              {1.383e6, 93.97e6}}};
}
CnnTraffic vgg16_traffic() {
  return {369.6e6,
          101,
          22.63e6,
          {{0.004096e6, 0.3113e6},
           {0.02509e6, 0.4014e6},
           {0.1004e6, 7.627e6},
           {0.4014e6, 30.51e6},
           {0.8028e6, 61.01e6},
           {1.606e6, 89.92e6},
           {3.211e6, 179.8e6}}};
}
CnnTraffic alexnet_traffic() {
  return {16.2e6,
          57,
          0.82e6,
          {{0.004096e6, 0.2376e6},
           {0.009216e6, 0.3133e6},
           {0.04326e6, 2.397e6},
           {0.0649e6, 1.298e6},
           {0.14e6, 4.998e6},
           {0.1936e6, 6.942e6}}};
}
CnnTraffic alexnet_tf_traffic() {
  return {16.6e6,
          57,
          0.87e6,
          {{0.004096e6, 0.2376e6},
           {0.009216e6, 0.3133e6},
           {0.04326e6, 1.532e6},
           {0.0649e6, 2.596e6},
           {0.14e6, 4.998e6},
           {0.1936e6, 6.942e6}}};
}

// An ImageNet CNN's workload with its traffic between the products; the caller adds the layers.
Workload cnn(const std::string& name, const std::string& source, const CnnTraffic& t) {
  Workload w;
  w.name = name;
  w.source = source;
  w.elementwise_bytes = t.bytes;
  w.elementwise_by_tensor = t.by_tensor;
  w.kernels = t.kernels;
  w.conv_io_values = t.conv_io;
  w.input_bytes = kImageNetJpegBytes;
  return w;
}

// Layer given as (params, multiply-adds, share of them in stride-1 3x3 convolutions);
// FLOPs = 2 x MACs.
LayerCost L(const std::string& name, double params, double macs, double winograd = 0) {
  return {name, params, 2 * macs, winograd};
}
// The same for a stage of convolutions.
LayerCost C(const std::string& name, double params, double macs, double winograd = 0,
            double image_input = 0) {
  return {name, params, 2 * macs, winograd, ProductKind::kConv, image_input};
}

Workload transformer(const std::string& name, const std::string& source, int layers, double d_model,
                     int heads, double seq, double vocab, double params_total) {
  // Kaplan et al. 2020, "Scaling Laws for Neural Language Models", Table 1: forward FLOPs per
  // token ~= 2 N + 2 n_layer n_ctx d_model, N = non-embedding parameters (12 n_layer d^2).
  Workload w;
  w.name = name;
  w.source = source;
  double embed = (vocab + seq) * d_model;
  double per_layer = (params_total - embed) / layers;
  w.layers.push_back({"embedding", embed, 0});
  for (int i = 0; i < layers; ++i)
    w.layers.push_back(
        {fmt::format("block{}", i), per_layer, seq * (2 * per_layer + 2 * seq * d_model)});
  // Activation memory: Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
  // Transformer Models", eq. 1): s h (34 + 5 a s / h) bytes per layer per sample at 16 bits;
  // doubled for fp32.
  w.activation_bytes = 2 * layers * seq * d_model * (34 + 5.0 * heads * seq / d_model);
  w.input_bytes = 4 * seq;  // token ids
  // Between the products, per token and layer, values read + written forward and backward by
  // the rules of scripts/workload-traffic: two LayerNorms on d (16 d), GELU on 4d (20 d), two
  // residual-path dropouts and adds (21 d), the copies that split q, k, v into heads and merge
  // the context (12 d), bias gradients and the rest (about 3 d); and per head and key position
  // the scale and mask (5), the softmax (5) and its dropout (4.5): about 72 d + 15 a s.
  w.elementwise_bytes = 4.0 * layers * seq * (72 * d_model + 15 * heads * seq);
  // By tensor: GELU's 20 d on [seq, 4 d], the scores' 15 a s on [heads, seq, seq], the rest
  // (52 d) on [seq, d].
  w.elementwise_by_tensor = {{seq * d_model, 4.0 * layers * seq * 52 * d_model},
                             {seq * 4 * d_model, 4.0 * layers * seq * 20 * d_model},
                             {heads * seq * seq, 4.0 * layers * seq * 15 * heads * seq}};
  // Autocast keeps the LayerNorms (16 d) and the softmax with its scale and mask (10 a s) in
  // fp32 (PyTorch's "CUDA ops that can autocast to float32").
  w.fp32_elementwise_bytes = 4.0 * layers * seq * (16 * d_model + 10 * heads * seq);
  // Per layer: six linears (4 each), two batched products (3 each), softmax, dropouts,
  // LayerNorms, GELU, adds and the head copies (2 each, 13 of them): 56; plus the embedding
  // and the loss.
  w.kernels = 56.0 * layers + 10;
  w.default_batch = 8;
  return w;
}

}  // namespace

Workload decoder_workload(const DecoderShape& s) {
  if (s.layers < 1 || s.heads < 1 || !(s.d_model > 0) || !(s.seq > 0) || !(s.vocab > 0))
    throw InputError(
        fmt::format("decoder '{}': layers, heads, d_model, seq and vocab must be > 0", s.name));
  const double output = s.untied_output ? s.vocab * s.d_model : 0;
  const double blocks = s.params - (s.vocab + s.seq) * s.d_model - output;
  if (!(blocks > 0))
    throw InputError(fmt::format(
        "decoder '{}': {:g} parameters leave nothing for its blocks after the embedding", s.name,
        s.params));
  Workload w = transformer(s.name, "a decoder of the given shape", s.layers, s.d_model, s.heads,
                           s.seq, s.vocab, s.params - output);
  if (s.recompute)
    // Forward, its repeat and backward (2 x forward) are four forwards: 3 x (4/3).
    for (auto& l : w.layers) l.fwd_flops *= 4.0 / 3;
  // The logits: a product with the (tied or untied) vocabulary matrix per token, and the
  // softmax cross-entropy over them, 5 values per logit unfused (read and write forward, read
  // two and write one backward) and 2 fused (one pass each way).
  w.layers.push_back({"logits", output, 2 * s.d_model * s.vocab * s.seq});
  w.elementwise_bytes += 4.0 * s.seq * s.vocab * (s.fused ? 2 : 5);
  w.fp32_elementwise_bytes += 4.0 * s.seq * s.vocab * (s.fused ? 2 : 5);
  w.elementwise_by_tensor.push_back({s.seq * s.vocab, 4.0 * s.seq * s.vocab * (s.fused ? 2 : 5)});
  if (s.fused) {
    // No per-head scores in memory: only the per-token terms stay; the fused LayerNorm runs in
    // the activations' precision.
    w.elementwise_bytes -= 4.0 * s.layers * s.seq * 15 * s.heads * s.seq;
    w.fp32_elementwise_bytes = 4.0 * s.seq * s.vocab * 2;
    // The scores: transformer() lists them third.
    w.elementwise_by_tensor.erase(w.elementwise_by_tensor.begin() + 2);
  }
  if (s.recompute) {
    w.elementwise_bytes *= 4.0 / 3;
    w.fp32_elementwise_bytes *= 4.0 / 3;
    for (auto& t : w.elementwise_by_tensor) t.bytes *= 4.0 / 3;
  }
  w.kernels += 6;
  return w;
}

namespace {

// AlexNet: torchvision's (Krizhevsky 2014, "one weird trick"; torchvision docs: 61.1M params,
// 0.71 GMAC) has 256 filters in its fourth convolution, which the fifth reads;
// tf_cnn_benchmarks' `alexnet` (`tf`: models/alexnet_model.py; 61.84M params, 0.84 GMAC) has
// 384. Both on 13x13 maps from 384 channels.
Workload alexnet(bool tf) {
  Workload w =
      tf ? cnn("alexnet-tf", "tf_cnn_benchmarks' alexnet (61.84M params, 0.84 GMAC)",
               alexnet_tf_traffic())
         : cnn("alexnet", "Krizhevsky et al. NIPS 2012; torchvision docs (61.1M, 0.71 GMAC)",
               alexnet_traffic());
  const double conv4_filters = tf ? 384 : 256, positions = 13 * 13;
  const double conv4_weights = 384 * conv4_filters * 9, conv5_weights = conv4_filters * 256 * 9;
  // conv3-5 are 3x3 with stride 1; conv1 (11x11, stride 4) and conv2 (5x5) are not.
  w.layers = {C("conv1", 0.023 * kM, 0.070 * kG, 0, 1),
              C("conv2", 0.307 * kM, 0.224 * kG),
              C("conv3", 0.664 * kM, 0.112 * kG, 1),
              C("conv4", conv4_weights + conv4_filters, conv4_weights * positions, 1),
              C("conv5", conv5_weights + 256, conv5_weights * positions, 1),
              L("fc6", 37.75 * kM, 0.0378 * kG),
              L("fc7", 16.78 * kM, 0.0168 * kG),
              L("fc8", 4.10 * kM, 0.0041 * kG)};
  w.activation_bytes = 15e6;  // estimate
  w.default_batch = 128;
  return w;
}

// ResNet-50 (He et al. 2016, Table 1: 3.8e9 multiply-adds; 25,557,032 params). v1.5,
// torchvision's (4.09 GMACs at 224x224): a stage's first block strides on its 3x3. v1, as He et
// al. define it and tf_cnn_benchmarks builds its `resnet50` (models/resnet_model.py,
// bottleneck_block_v1): on its first 1x1, so that convolution and its 3x3 run at a quarter of
// the positions (3.86 GMACs), and every 3x3 has stride 1. Stage split and the share of each
// stage in stride-1 3x3 convolutions computed from the bottleneck shapes; traffic by
// scripts/workload-traffic (v1: torchvision's layers with the strides moved).
Workload resnet50(bool v1) {
  Workload w =
      v1 ? cnn("resnet50-v1",
               "He et al. CVPR 2016 (v1: 25.56M params, 3.86 GMAC); tf_cnn_benchmarks' resnet50",
               resnet50_v1_traffic())
         : cnn("resnet50", "He et al. CVPR 2016; torchvision docs (25.56M params, 4.09 GMAC)",
               resnet50_traffic());
  w.layers = {
      C("conv1", 0.0094 * kM, 0.118 * kG, 0, 1),
      C("conv2_x", 0.216 * kM, 0.68 * kG, 0.519),
      v1 ? C("conv3_x", 1.22 * kM, 0.95 * kG, 0.486) : C("conv3_x", 1.22 * kM, 1.03 * kG, 0.338),
      v1 ? C("conv4_x", 7.10 * kM, 1.39 * kG, 0.500) : C("conv4_x", 7.10 * kM, 1.46 * kG, 0.395),
      v1 ? C("conv5_x", 14.96 * kM, 0.73 * kG, 0.474) : C("conv5_x", 14.96 * kM, 0.80 * kG, 0.286),
      L("fc", 2.05 * kM, 0.002 * kG)};
  // Estimate: stored feature maps (conv, BN, ReLU); v1's three strided blocks keep
  // quarter-size maps.
  w.activation_bytes = v1 ? 95e6 : 100e6;
  w.train_samples = 90 * kImageNetTrainImages;
  w.train_samples_source = "90 epochs of ImageNet (Goyal et al. 2017)";
  return w;
}

const std::map<std::string, std::function<Workload()>>& registry() {
  static const std::map<std::string, std::function<Workload()>> r = {
      {"resnet50", [] { return resnet50(false); }},
      {"resnet50-v1", [] { return resnet50(true); }},
      {"resnet101",
       [] {
         Workload w =
             cnn("resnet101", "He et al. CVPR 2016; torchvision docs (44.55M params, 7.80 GMAC)",
                 resnet101_traffic());
         w.layers = {
             C("conv1", 0.0094 * kM, 0.118 * kG, 0, 1),  C("conv2_x", 0.216 * kM, 0.68 * kG, 0.519),
             C("conv3_x", 1.22 * kM, 1.03 * kG, 0.338),  C("conv4_x", 26.09 * kM, 5.17 * kG, 0.491),
             C("conv5_x", 14.96 * kM, 0.80 * kG, 0.286), L("fc", 2.05 * kM, 0.002 * kG)};
         w.activation_bytes = 160e6;  // estimate
         return w;
       }},
      {"inception3",
       [] {
         // Szegedy et al. CVPR 2016 ("~5 billion multiply-adds, <25M parameters"); torchvision
         // docs: 5.71 GMAC at 299x299, 27.16M params with the auxiliary head (23.8M without).
         // Stride-1 3x3 shares estimated from the block shapes (stem: its three stride-1 3x3
         // convolutions; mixed6b-e: 1x7/7x1 only).
         Workload w = cnn("inception3", "Szegedy et al. CVPR 2016; torchvision docs (5.71 GMAC)",
                          inception3_traffic());
         // The stem's first convolution reads the image: 149 x 149 x 32 outputs x 27 = 19.2M MACs.
         w.layers = {C("stem", 0.17 * kM, 1.74 * kG, 0.74, 0.0110),
                     C("mixed5", 0.83 * kM, 1.00 * kG, 0.50),
                     C("mixed6a", 1.15 * kM, 0.35 * kG, 0.19),
                     C("mixed6b-e", 6.10 * kM, 1.76 * kG),
                     C("mixed7a", 1.70 * kM, 0.15 * kG),
                     C("mixed7b-c", 11.10 * kM, 0.71 * kG, 0.28),
                     L("fc", 2.05 * kM, 0.002 * kG)};
         w.activation_bytes = 120e6;  // estimate
         return w;
       }},
      {"vgg16",
       [] {
         // Simonyan & Zisserman ICLR 2015 (138M params); torchvision docs: 138,357,544 params,
         // 15.47 GMAC. Per-layer figures computed from the layer shapes at 224x224.
         Workload w = cnn("vgg16", "Simonyan & Zisserman ICLR 2015; torchvision docs (15.47 GMAC)",
                          vgg16_traffic());
         // Every convolution is 3x3 with stride 1; conv1_1 reads the image: 224 x 224 x 64
         // outputs x 27 = 86.7M of the stage's 1.94G MACs.
         w.layers = {C("conv1", 0.0387 * kM, 1.94 * kG, 1, 0.0447),
                     C("conv2", 0.221 * kM, 2.77 * kG, 1),
                     C("conv3", 1.475 * kM, 4.62 * kG, 1),
                     C("conv4", 5.90 * kM, 4.62 * kG, 1),
                     C("conv5", 7.08 * kM, 1.39 * kG, 1),
                     L("fc6", 102.76 * kM, 0.1028 * kG),
                     L("fc7", 16.78 * kM, 0.0168 * kG),
                     L("fc8", 4.10 * kM, 0.0041 * kG)};
         w.activation_bytes = 110e6;  // estimate: ~27M stored floats
         return w;
       }},
      {"alexnet", [] { return alexnet(false); }},
      {"alexnet-tf", [] { return alexnet(true); }},
      {"cntk-dnn",
       [] {
         // Seide et al. Interspeech 2014 (1-bit SGD): a 46M-parameter speech DNN. Shape as in
         // their Switchboard setup: 429 inputs (11 frames x 39), 7 x 2048 sigmoid layers, 9304
         // senones; one sample = one frame.
         Workload w;
         w.name = "cntk-dnn";
         w.source = "Seide et al. Interspeech 2014 (46M-parameter speech DNN)";
         w.layers.push_back(L("fc1", 429.0 * 2048 + 2048, 429.0 * 2048));
         for (int i = 2; i <= 7; ++i)
           w.layers.push_back(L(fmt::format("fc{}", i), 2048.0 * 2048 + 2048, 2048.0 * 2048));
         w.layers.push_back(L("out", 2048.0 * 9304 + 9304, 2048.0 * 9304));
         w.activation_bytes = 4.0 * (7 * 2048 * 2 + 9304);
         // Sigmoids and the softmax read and write their values forward and backward (5 per
         // value, as scripts/workload-traffic counts a ReLU); 8 linears, 7 sigmoids, the loss.
         w.elementwise_bytes = 4.0 * 5 * (7 * 2048 + 9304);
         w.elementwise_by_tensor = {{2048, 4.0 * 5 * 7 * 2048}, {9304, 4.0 * 5 * 9304}};
         w.kernels = 8 * 4 + 7 * 2 + 4;
         w.input_bytes = 4 * 429;
         w.default_batch = 1024;
         return w;
       }},
      {"bert-large",
       [] {
         Workload w = transformer(
             "bert-large", "Devlin et al. NAACL 2019 (340M params, 24x1024, 16 heads); seq 512", 24,
             1024, 16, 512, 30522, 340e6);
         w.train_samples = kBertPretrainSequences;
         w.train_samples_source = kBertPretrainSource;
         return w;
       }},
      {"bert-large-128",
       [] {
         Workload w = transformer("bert-large-128",
                                  "Devlin et al. NAACL 2019 (340M params, 24x1024, 16 heads); seq "
                                  "128 (pre-training phase 1)",
                                  24, 1024, 16, 128, 30522, 340e6);
         w.train_samples = kBertPretrainSequences;
         w.train_samples_source = kBertPretrainSource;
         return w;
       }},
      {"gpt2",
       [] {
         return transformer("gpt2",
                            "Radford et al. 2019 (GPT-2 small: 124M, 12x768, 12 heads); seq 1024",
                            12, 768, 12, 1024, 50257, 124e6);
       }},
      {"gpt2-xl",
       [] {
         return transformer("gpt2-xl",
                            "Radford et al. 2019 (GPT-2 1.5B: 1558M, 48x1600, 25 heads); seq 1024",
                            48, 1600, 25, 1024, 50257, 1558e6);
       }},
  };
  return r;
}

// One linear layer in -> out: params in*out + out; forward 2*in*out FLOPs per sample.
LayerCost linear(const std::string& name, double in, double out) {
  return {name, in * out + out, 2 * in * out};
}

}  // namespace

std::vector<std::string> reference_workload_names() {
  std::vector<std::string> out;
  for (auto& [k, v] : registry()) out.push_back(k);
  return out;
}

Workload reference_workload(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end())
    throw InputError(unknown_name_message("workload", name, reference_workload_names(),
                                          "or give a loom model config .toml"));
  return it->second();
}

namespace {

Workload fashion_mnist_workload(const std::string& name, int64_t batch) {
  Workload w;
  w.name = name;
  w.source = "computed from the layer shapes of " + name;
  w.input_bytes = 28 * 28 + 1;  // IDX: one byte per pixel and a label byte
  w.default_batch = batch;
  w.first_layer_input_grad = false;  // loom's first layer never computes d(input)
  return w;
}

}  // namespace

Workload mlp_workload(const std::vector<int64_t>& hidden_widths, double dropout, int64_t batch,
                      const std::string& name) {
  Workload w = fashion_mnist_workload(name, batch);
  const std::vector<double> hidden(hidden_widths.begin(), hidden_widths.end());
  double act = 0;  // floats stored for backward per sample
  double in = 784;
  act += in;
  for (size_t i = 0; i < hidden.size(); ++i) {
    w.layers.push_back(linear(fmt::format("fc{}", i + 1), in, hidden[i]));
    act += 2 * hidden[i] + hidden[i] / 4;  // pre-activation, ReLU output, dropout mask (bytes)
    in = hidden[i];
  }
  w.layers.push_back(linear("out", in, 10));
  act += 2 * 10;
  std::vector<double> widths = {784};
  widths.insert(widths.end(), hidden.begin(), hidden.end());
  widths.push_back(10);
  w.elementwise_bytes = mlp_elementwise_bytes(widths, dropout);
  w.elementwise_by_tensor = mlp_elementwise_by_tensor(widths, dropout);
  w.activation_bytes = 4 * act;
  // Per hidden layer its linear (4), ReLU (2) and dropout (2); the output linear and the loss.
  w.kernels = hidden.size() * (4.0 + 2 + (dropout > 0 ? 2 : 0)) + 4 + 4;
  return w;
}

Workload cnn_workload(int64_t batch, const std::string& name) {
  Workload w = fashion_mnist_workload(name, batch);
  // conv 5x5 32 (pad 2) + ReLU + maxpool 2 -> 14x14x32; conv 5x5 64 + ReLU + maxpool 2 ->
  // 7x7x64; linear 3136 -> 1024 + ReLU + dropout; linear 1024 -> 10.
  auto conv = [](const std::string& n, double cin, double cout, double hw, bool reads_image) {
    double k = 25 * cin * cout;
    return LayerCost{n, k + cout, 2 * k * hw, 0, ProductKind::kConv, reads_image ? 1.0 : 0.0, cin};
  };
  w.layers.push_back(conv("conv1", 1, 32, 28 * 28, true));  // Fashion-MNIST's one channel
  w.layers.push_back(conv("conv2", 32, 64, 14 * 14, false));
  w.layers.push_back(linear("fc1", 7 * 7 * 64, 1024));
  w.layers.push_back(linear("out", 1024, 10));
  const double act =
      784 + 2 * 28 * 28 * 32 + 14 * 14 * 32 + 2 * 14 * 14 * 64 + 7 * 7 * 64 + 2 * 1024 + 256 + 20;
  w.activation_bytes = 4 * act;
  // Two convolutions (3 each), three ReLUs and two pools (2 each), two linears (4 each), the
  // dropout and the loss.
  w.kernels = 2 * 3 + 5 * 2 + 2 * 4 + 2 + 4;
  w.conv_io_values = (28 * 28 * 1 + 28 * 28 * 32) + (14 * 14 * 32 + 14 * 14 * 64);
  return w;
}

Workload workload_from_graph(const std::string& name, const std::vector<GraphLayer>& layers,
                             double input_bytes, int64_t default_batch) {
  Workload w;
  w.name = name;
  w.source = "computed from the layers of the model graph " + name;
  w.input_bytes = input_bytes;
  w.default_batch = default_batch;
  w.first_layer_input_grad = false;              // loom's first layer never computes d(input)
  double act = 0, elementwise = 0, kernels = 4;  // the loss, forward and backward
  for (const GraphLayer& l : layers) {
    act += l.out;
    if (l.kind == "Linear" || l.kind == "Conv2d") {  // GEMM-shaped
      const ProductKind kind = l.kind == "Conv2d" ? ProductKind::kConv : ProductKind::kGemm;
      w.layers.push_back({l.name, l.params, l.fwd_flops, 0, kind});
      kernels += 4;  // forward, two backward products, the bias gradient
      if (kind == ProductKind::kConv) w.conv_io_values += l.in + l.out;
      continue;
    }
    elementwise += 4 * 3 * (l.in + l.out);  // forward r+w, backward about twice
    w.elementwise_by_tensor.push_back({std::max(l.in, l.out), 4 * 3 * (l.in + l.out)});
    kernels += 2;
    if (l.params > 0) w.layers.push_back({l.name, l.params, 0, 0});  // BatchNorm's gamma, beta
  }
  w.kernels = kernels;
  w.activation_bytes = 4 * act;
  w.elementwise_bytes = elementwise;
  return w;
}

std::vector<TensorTraffic> mlp_elementwise_by_tensor(const std::vector<double>& widths,
                                                     double dropout) {
  // Per hidden unit per sample (4-byte floats, 1-byte dropout mask): forward bias add (r+w 8),
  // ReLU (8), dropout (r 4, w 4 + mask 1); backward dropout (r 4 + 1, w 4), ReLU (r y 4, dy 4,
  // w 4), bias gradient (r 4): 50, or 32 without dropout. Per logit: bias add (8), softmax
  // cross-entropy (r 4, w 4), bias gradient (4): 20.
  std::vector<TensorTraffic> out;
  for (size_t i = 1; i + 1 < widths.size(); ++i)
    out.push_back({widths[i], (dropout > 0 ? 50 : 32) * widths[i]});
  if (widths.size() >= 2) out.push_back({widths.back(), 20 * widths.back()});
  return out;
}

double mlp_elementwise_bytes(const std::vector<double>& widths, double dropout) {
  double bytes = 0;
  for (const TensorTraffic& t : mlp_elementwise_by_tensor(widths, dropout)) bytes += t.bytes;
  return bytes;
}

}  // namespace loom::perf
