// Causal multi-head self-attention (Vaswani et al. 2017, with the decoder's causal mask), the
// layer torch.nn.MultiheadAttention computes for query = key = value = x with a causal
// attn_mask: on [time, dim],
//   [Q K V] = x W_in^T + b_in                    W_in [3 dim, dim]: the rows of Q, then K, V
//   per head h (dim / heads columns each):  P_h = causal_softmax(Q_h K_h^T / sqrt(dim / heads))
//   y = concat_h(P_h V_h) W_out^T + b_out        W_out [dim, dim]
// Position i attends to positions 0..i only: its output does not depend on later positions.
//
// The plain algorithm: forward keeps Q, K, V, the probabilities [heads, time, time] and the
// heads' outputs for backward. Memory is quadratic in time, which at the contexts this layer is
// meant for (a few hundred positions) is a few MB per sample and buys backward without
// recomputing the scores; a tiled (flash-style) kernel would make it linear at the price of a
// second pass over the scores in backward.
#pragma once

#include "loom/nn/layers/layer.h"
#include "loom/tensor/buffer.h"

namespace loom::nn {

class CausalSelfAttention final : public Layer {
 public:
  CausalSelfAttention(int64_t dim, int64_t heads, bool bias = true);
  std::string kind() const override { return "Attention"; }
  std::string describe() const override;
  // ConfigError unless the input is [time, dim].
  Shape build(const Shape& input) override;
  // W_in [3 dim, dim], b_in [3 dim], W_out [dim, dim], b_out [dim] (as MultiheadAttention's
  // in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias); no biases without `bias`.
  int64_t num_params() const override;
  std::vector<std::array<int64_t, 2>> param_matrices() const override;
  void bind(float* params, float* grads) override;
  // MultiheadAttention's: W_in Xavier-uniform, W_out U(+-1/sqrt(dim)), biases zero.
  void init_params(Rng& rng, Backend& backend) override;
  // The four GEMMs: the projections (2 time dim 3 dim, 2 time dim dim) and per head the
  // scores Q K^T and the weighted sum P V (2 time time dim each, counted in full: the GEMMs
  // compute the masked half too). The softmax is left out (a few operations per score).
  int64_t flops_per_sample() const override;
  // Q, K, V (3 time dim), the probabilities (heads time time), the heads' outputs (time dim).
  int64_t saved_floats_per_sample() const override;
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override;
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override;

  int64_t dim() const { return dim_; }
  int64_t heads() const { return heads_; }

 private:
  int64_t dim_, heads_, head_dim_;
  bool bias_;
  int64_t time_ = 0;
  float *w_in_ = nullptr, *b_in_ = nullptr, *w_out_ = nullptr, *b_out_ = nullptr;
  float *dw_in_ = nullptr, *db_in_ = nullptr, *dw_out_ = nullptr, *db_out_ = nullptr;
  // Kept from the last forward, grown to the largest batch: [batch, time, 3 dim],
  // [batch, heads, time, time], [batch, time, dim].
  DeviceBuffer<float> qkv_, probs_, heads_out_;
  // Backward's scratch: the heads' output gradient, the Q K V gradient, one sample's score
  // gradients.
  DeviceBuffer<float> dheads_, dqkv_, dscores_;
};

}  // namespace loom::nn
