// The layers of a decoder-only transformer: Embedding, PositionEmbedding, LayerNorm, causal
// self-attention, Linear over the last axis, and the token loss with an ignored label. Each
// against PyTorch's values (tests/data/nn/seq_*.txt, written by make_seq_references.py) and
// against central differences; attention's mask is shown causal by changing later tokens; and a
// two-block transformer built from [[layer]] tables learns a repeated sequence.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/nn/graph/graph_builder.h"
#include "loom/nn/graph/graph_spec.h"
#include "loom/nn/graph/model.h"
#include "loom/nn/graph/model_description.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/nn/layers/attention.h"
#include "loom/nn/layers/embedding.h"
#include "loom/nn/layers/fixed_bias.h"
#include "loom/nn/layers/layernorm.h"
#include "loom/nn/layers/linear.h"
#include "loom/nn/layers/relative_position_bias.h"
#include "loom/plan/model_reader.h"
#include "nn/grad_check.h"
#include "nn/reference_data.h"

namespace loom::nn {
namespace {

using testing::check_layer_gradients;
using testing::expect_gradient_matches;
using testing::expect_matches;
using testing::join;
using testing::load_reference;
using testing::make_context;
using testing::random_vector;
using testing::run_layer;
using testing::Tolerance;

std::vector<float> slice(const std::vector<float>& v, size_t from, size_t n) {
  return {v.begin() + long(from), v.begin() + long(from + n)};
}

// ---- against PyTorch ----

TEST(SeqReference, EmbeddingMatchesTorch) {
  const auto ref = load_reference("seq_embedding");
  Embedding layer(ref.iattr("vocab"), ref.iattr("dim"));
  const auto run = run_layer(layer, ref, ref.tensor("table").floats(), {});
  EXPECT_EQ(run.out_shape, (Shape{ref.tensor("x").shape[1], ref.iattr("dim")}));
  // A copy: exact, but for the reference's 10 printed digits.
  expect_matches("y", run.y, ref.tensor("y"), 1e-9, 0);
  expect_matches("dtable", run.dparams, ref.tensor("dtable"));
  for (float v : run.dx) EXPECT_EQ(v, 0.0f);  // ids get no gradient
}

TEST(SeqReference, PositionEmbeddingMatchesTorch) {
  const auto ref = load_reference("seq_position_embedding");
  PositionEmbedding layer(ref.iattr("max_len"), ref.iattr("dim"));
  const auto run = run_layer(layer, ref, ref.tensor("table").floats(), {});
  expect_matches("y", run.y, ref.tensor("y"));
  expect_matches("dx", run.dx, ref.tensor("dx"), 1e-9, 0);
  expect_matches("dtable", run.dparams, ref.tensor("dtable"));
}

class LayerNormReference : public ::testing::TestWithParam<const char*> {};

TEST_P(LayerNormReference, MatchesTorch) {
  const auto ref = load_reference(GetParam());
  LayerNorm layer(float(ref.attr("eps")));
  const auto run = run_layer(layer, ref, join(ref, {"gamma", "beta"}), {});
  const size_t c = ref.tensor("gamma").values.size();
  expect_matches("y", run.y, ref.tensor("y"));
  expect_matches("dx", run.dx, ref.tensor("dx"), 1e-4);
  expect_matches("dgamma", slice(run.dparams, 0, c), ref.tensor("dgamma"));
  expect_matches("dbeta", slice(run.dparams, c, c), ref.tensor("dbeta"));
}

// seq_layernorm_offset: values near 300 with spread 2, where a one-pass E[x^2] - E[x]^2 in
// float would lose most of the variance's digits.
INSTANTIATE_TEST_SUITE_P(Cases, LayerNormReference,
                         ::testing::Values("seq_layernorm", "seq_layernorm_offset"));

class AttentionReference : public ::testing::TestWithParam<const char*> {};

TEST_P(AttentionReference, MatchesTorchMultiheadAttention) {
  const auto ref = load_reference(GetParam());
  const bool bias = ref.iattr("bias") != 0;
  CausalSelfAttention layer(ref.iattr("dim"), ref.iattr("heads"), bias);
  const auto params =
      bias ? join(ref, {"w_in", "b_in", "w_out", "b_out"}) : join(ref, {"w_in", "w_out"});
  const auto run = run_layer(layer, ref, params, {});
  expect_matches("y", run.y, ref.tensor("y"), 2e-5);
  expect_matches("dx", run.dx, ref.tensor("dx"), 2e-5);
  const int64_t d = ref.iattr("dim");
  size_t at = 0;
  auto next = [&](const char* key, int64_t n) {
    expect_matches(key, slice(run.dparams, at, size_t(n)), ref.tensor(key), 2e-5);
    at += size_t(n);
  };
  next("dw_in", 3 * d * d);
  if (bias) next("db_in", 3 * d);
  next("dw_out", d * d);
  if (bias) next("db_out", d);
  EXPECT_EQ(at, run.dparams.size());
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionReference,
                         ::testing::Values("seq_attention", "seq_attention_nobias"));

TEST(SeqReference, IgnoredLabelsMatchTorchCrossEntropy) {
  const auto ref = load_reference("seq_xent_ignore");
  const auto& z = ref.tensor("logits");
  const int64_t rows = z.shape[0], cols = z.shape[1];
  std::vector<int32_t> labels;
  for (double v : ref.tensor("labels").values) labels.push_back(int32_t(v));
  const int32_t ignore = int32_t(ref.iattr("ignore_index"));
  const auto logits = z.floats();
  std::vector<float> dz(logits.size(), 7.0f);
  int64_t correct = -1, counted = -1;
  const double loss = cpu_backend().softmax_xent_ignore(
      logits.data(), labels.data(), rows, cols, 1.0f, dz.data(), &correct, 0.0f, ignore, &counted);
  int64_t expect_counted = 0;
  for (int32_t l : labels) expect_counted += l != ignore;
  EXPECT_EQ(counted, expect_counted);
  EXPECT_NEAR(loss, ref.tensor("loss").values[0], 1e-5);
  EXPECT_NEAR(loss / double(counted), ref.tensor("mean").values[0], 1e-6);
  expect_matches("dlogits", dz, ref.tensor("dlogits"));
}

// ---- gradients against central differences ----

// Smooth layers: a step of 1e-2 keeps the truncation error (h^2 f''' / 6) near 1e-5.
constexpr Tolerance kSeqSmooth{1e-2, 2e-3, 2e-4};

TEST(SeqGradients, LayerNorm) {
  LayerNorm layer;
  auto x = random_vector(3 * 4 * 6, 11, -2.0f, 2.0f);
  check_layer_gradients(layer, {4, 6}, 3, x, make_context(), kSeqSmooth);
}

TEST(SeqGradients, LayerNormGainAndBiasAwayFromTheirInit) {
  // At gamma = 1 and beta = 0 a wrong gamma/beta indexing could go unseen: draw both.
  LayerNorm layer;
  const Shape shape{3, 5};
  layer.build(shape);
  const int64_t batch = 2, n = batch * numel(shape);
  std::vector<float> params = random_vector(layer.num_params(), 12, 0.5f, 1.5f);
  std::vector<float> grads(params.size(), 99.0f), x = random_vector(n, 13, -3.0f, 3.0f);
  layer.bind(params.data(), grads.data());
  const auto r = random_vector(n, 14);
  std::vector<float> y(static_cast<size_t>(n)), dx(static_cast<size_t>(n));
  auto loss = [&] {
    layer.forward(make_context(), x.data(), y.data(), batch);
    return testing::project(y, r);
  };
  loss();
  layer.backward(make_context(), x.data(), y.data(), r.data(), dx.data(), batch);
  const auto analytic_params = grads;
  expect_gradient_matches("dx", x, dx, loss, kSeqSmooth);
  expect_gradient_matches("dparams", params, analytic_params, loss, kSeqSmooth);
}

TEST(SeqGradients, Attention) {
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "bias" : "no bias");
    CausalSelfAttention layer(8, 2, bias);
    check_layer_gradients(layer, {5, 8}, 2, random_vector(2 * 5 * 8, 21), make_context(),
                          kSeqSmooth);
  }
}

// Past 128 positions the layer computes its causal products in row blocks (two at 130, three
// at 200, of unequal sizes): the gradients hold across the blocks' edges.
TEST(SeqGradients, AttentionAcrossRowBlocks) {
  for (int64_t time : {130, 200}) {
    SCOPED_TRACE(fmt::format("{} positions", time));
    CausalSelfAttention layer(4, 2);
    check_layer_gradients(layer, {time, 4}, 1, random_vector(time * 4, 23), make_context(),
                          kSeqSmooth);
  }
}

// The forward against attention written out in double, head by head and row by row, at
// lengths of one, two and three row blocks.
TEST(SeqAttention, ForwardMatchesTheDefinitionAcrossRowBlocks) {
  const int64_t D = 8, H = 2, dh = D / H, batch = 2;
  for (int64_t T : {9, 130, 200}) {
    SCOPED_TRACE(fmt::format("{} positions", T));
    CausalSelfAttention layer(D, H);
    layer.build({T, D});
    std::vector<float> params = random_vector(layer.num_params(), 65), grads(params.size());
    layer.bind(params.data(), grads.data());
    const auto x = random_vector(batch * T * D, 66, -2.0f, 2.0f);
    std::vector<float> y(x.size());
    layer.forward(make_context(), x.data(), y.data(), batch);
    const float* w_in = params.data();
    const float* b_in = w_in + 3 * D * D;
    const float* w_out = b_in + 3 * D;
    const float* b_out = w_out + D * D;
    double worst = 0;
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<double> qkv(size_t(T * 3 * D)), heads(size_t(T * D));
      for (int64_t t = 0; t < T; ++t)
        for (int64_t o = 0; o < 3 * D; ++o) {
          double acc = b_in[o];
          for (int64_t i = 0; i < D; ++i)
            acc += double(w_in[o * D + i]) * x[size_t((b * T + t) * D + i)];
          qkv[size_t(t * 3 * D + o)] = acc;
        }
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < T; ++t) {
          std::vector<double> s(size_t(t + 1));
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j <= t; ++j) {
            double dot = 0;
            for (int64_t e = 0; e < dh; ++e)
              dot += qkv[size_t(t * 3 * D + h * dh + e)] * qkv[size_t(j * 3 * D + D + h * dh + e)];
            s[size_t(j)] = dot / std::sqrt(double(dh));
            mx = std::max(mx, s[size_t(j)]);
          }
          for (double& v : s) sum += (v = std::exp(v - mx));
          for (int64_t e = 0; e < dh; ++e) {
            double acc = 0;
            for (int64_t j = 0; j <= t; ++j)
              acc += s[size_t(j)] / sum * qkv[size_t(j * 3 * D + 2 * D + h * dh + e)];
            heads[size_t(t * D + h * dh + e)] = acc;
          }
        }
      for (int64_t t = 0; t < T; ++t)
        for (int64_t o = 0; o < D; ++o) {
          double acc = b_out[o];
          for (int64_t j = 0; j < D; ++j)
            acc += double(w_out[o * D + j]) * heads[size_t(t * D + j)];
          worst = std::max(worst, std::fabs(acc - y[size_t((b * T + t) * D + o)]) /
                                      std::max(1.0, std::fabs(acc)));
        }
    }
    EXPECT_LT(worst, 1e-5);
  }
}

TEST(SeqGradients, AttentionOneHeadPerDimension) {
  CausalSelfAttention layer(4, 4);
  check_layer_gradients(layer, {3, 4}, 2, random_vector(2 * 3 * 4, 22), make_context(), kSeqSmooth);
}

// x + P: linear in both, so a wide step is exact up to float rounding.
TEST(SeqGradients, PositionEmbedding) {
  PositionEmbedding layer(7, 3);
  check_layer_gradients(layer, {5, 3}, 2, random_vector(2 * 5 * 3, 31), make_context(),
                        {0.05, 1e-3, 1e-5});
}

// The rows and x are copied: linear in both, so a wide step is exact up to float rounding.
TEST(SeqGradients, ClassToken) {
  ClassToken layer(2, 3);
  check_layer_gradients(layer, {4, 3}, 3, random_vector(3 * 4 * 3, 32), make_context(),
                        {0.05, 1e-3, 1e-5});
}

// Each sample is the learned rows, then its own positions; the rows' gradient sums the batch.
TEST(SeqClassToken, RowsComeFirstAndTheirGradientSumsTheBatch) {
  ClassToken layer(1, 2);
  ASSERT_EQ(layer.build({3, 2}), (Shape{4, 2}));
  std::vector<float> table = {7, 8}, dtable(2, -1);
  layer.bind(table.data(), dtable.data());
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6};
  std::vector<float> y(16);
  Context ctx = make_context();
  layer.forward(ctx, x.data(), y.data(), 2);
  EXPECT_EQ(y, (std::vector<float>{7, 8, 1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, -5, -6}));
  std::vector<float> dy(16), dx(12);
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = float(i);
  layer.backward(ctx, x.data(), y.data(), dy.data(), dx.data(), 2);
  EXPECT_EQ(dtable, (std::vector<float>{0 + 8, 1 + 9}));
  EXPECT_EQ(dx, (std::vector<float>{2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15}));
}

// x plus a constant: the identity's gradient, exact.
TEST(SeqGradients, FixedBias) {
  FixedBias layer;
  check_layer_gradients(layer, {2, 3, 4}, 3, random_vector(3 * 24, 35), make_context(),
                        {0.05, 1e-3, 1e-5});
}

// Every sample gets the same addend, its state; the input's gradient is the output's, and the
// addend learns nothing (no parameters).
TEST(SeqFixedBias, EverySampleGetsTheStateAndTheGradientPassesThrough) {
  FixedBias layer;
  ASSERT_EQ(layer.build({2, 2}), (Shape{2, 2}));
  EXPECT_EQ(layer.num_params(), 0);
  ASSERT_EQ(layer.num_state(), 4);
  ASSERT_EQ(layer.state_tensors().size(), 1u);
  EXPECT_EQ(layer.state_tensors()[0].name, "bias");
  EXPECT_EQ(layer.state_tensors()[0].shape, (Shape{2, 2}));
  std::vector<float> bias(4, 5.0f);
  layer.bind_state(bias.data());
  Context ctx = make_context();
  layer.init_state(*ctx.backend);
  EXPECT_EQ(bias, (std::vector<float>(4, 0.0f)));  // zeros unless imported
  bias = {0, -100, -100, 0};
  const std::vector<float> x = {1, 2, 3, 4, -1, -2, -3, -4};
  std::vector<float> y(8), dx(8, 9.0f);
  layer.forward(ctx, x.data(), y.data(), 2);
  EXPECT_EQ(y, (std::vector<float>{1, -98, -97, 4, -1, -102, -103, -4}));
  const std::vector<float> dy = {1, 2, 3, 4, 5, 6, 7, 8};
  layer.backward(ctx, x.data(), y.data(), dy.data(), dx.data(), 2);
  EXPECT_EQ(dx, dy);
}

// Scores plus gathered table entries: linear in both.
TEST(SeqGradients, RelativePositionBias) {
  RelativePositionBias layer(2, 3);
  check_layer_gradients(layer, {2, 3, 4, 4}, 2, random_vector(2 * 2 * 3 * 16, 33), make_context(),
                        {0.05, 1e-3, 1e-5});
}

// Entry (h, i, j) of every block gets the table's row for the offset of i from j, column h
// (Swin's relative_position_index: (di + w - 1) (2w - 1) + dj + w - 1).
TEST(SeqRelativePositionBias, EachEntryGetsTheRowOfItsOffset) {
  const int64_t w = 3, heads = 2, n = w * w, rows = (2 * w - 1) * (2 * w - 1);
  EXPECT_EQ(RelativePositionBias::table_row(w, 0, 0), 12);  // offset (0, 0): the centre
  EXPECT_EQ(RelativePositionBias::table_row(w, 0, 8), 0);   // (-2, -2)
  EXPECT_EQ(RelativePositionBias::table_row(w, 8, 0), 24);  // (2, 2)
  EXPECT_EQ(RelativePositionBias::table_row(w, 1, 3), 8);   // (-1, 1): 1 * 5 + 3
  RelativePositionBias layer(w, heads);
  ASSERT_EQ(layer.build({heads, n, n}), (Shape{heads, n, n}));
  std::vector<float> table(size_t(rows * heads)), dtable(table.size(), -1);
  for (size_t k = 0; k < table.size(); ++k) table[k] = float(k);
  layer.bind(table.data(), dtable.data());
  const int64_t batch = 2, per = heads * n * n;
  const std::vector<float> x = random_vector(batch * per, 34);
  std::vector<float> y(x.size());
  Context ctx = make_context();
  layer.forward(ctx, x.data(), y.data(), batch);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          const size_t at = size_t(b * per + (h * n + i) * n + j);
          EXPECT_EQ(y[at],
                    x[at] + table[size_t(RelativePositionBias::table_row(w, i, j) * heads + h)]);
        }
  // Each table entry's gradient: the sum of dy over the entries that read it, in both samples.
  const std::vector<float> dy(x.size(), 1.0f);
  std::vector<float> dx(x.size());
  layer.backward(ctx, x.data(), y.data(), dy.data(), dx.data(), batch);
  EXPECT_EQ(dx, dy);
  std::vector<float> uses(table.size(), 0.0f);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        uses[size_t(RelativePositionBias::table_row(w, i, j) * heads + h)] += float(batch);
  EXPECT_EQ(dtable, uses);
}

TEST(SeqGradients, EmbeddingTable) {
  // The table only (ids have no gradient): L = sum r y, each y a table entry.
  const int64_t vocab = 6, dim = 3, time = 5, batch = 2;
  Embedding layer(vocab, dim);
  layer.build({time});
  std::vector<float> table = random_vector(vocab * dim, 41), grads(table.size(), 5.0f);
  layer.bind(table.data(), grads.data());
  const std::vector<float> ids = {0, 3, 3, 5, 1, 3, 0, 2, 2, 3};  // id 4 never occurs
  const auto r = random_vector(batch * time * dim, 42);
  std::vector<float> y(r.size());
  auto loss = [&] {
    layer.forward(make_context(), ids.data(), y.data(), batch);
    return testing::project(y, r);
  };
  loss();
  layer.backward(make_context(), ids.data(), y.data(), r.data(), nullptr, batch);
  const auto analytic = grads;
  for (int64_t d = 0; d < dim; ++d) EXPECT_EQ(analytic[size_t(4 * dim + d)], 0.0f);
  expect_gradient_matches("dtable", table, analytic, loss, {0.05, 1e-4, 1e-6});
}

TEST(SeqGradients, LinearOverTheLastAxis) {
  Linear layer(4, 3);
  EXPECT_EQ(layer.build({5, 4}), (Shape{5, 3}));
  EXPECT_EQ(layer.flops_per_sample(), 2 * 5 * 4 * 3);
  check_layer_gradients(layer, {5, 4}, 2, random_vector(40, 51), make_context(),
                        {0.05, 1e-3, 1e-5});
}

// Linear on [positions, features] is Linear on each position's row: the same numbers as the
// layer run on a batch of single rows.
TEST(SeqLinear, EachPositionIsOneRow) {
  Linear seq(4, 3), flat(4, 3);
  seq.build({5, 4});
  flat.build({4});
  std::vector<float> params = random_vector(seq.num_params(), 52), g1(params.size()),
                     g2(params.size());
  seq.bind(params.data(), g1.data());
  flat.bind(params.data(), g2.data());
  const auto x = random_vector(2 * 5 * 4, 53);
  std::vector<float> a(2 * 5 * 3), b(a.size());
  seq.forward(make_context(), x.data(), a.data(), 2);
  flat.forward(make_context(), x.data(), b.data(), 10);
  EXPECT_EQ(a, b);
}

// ---- the mask is causal ----

// Changing the input at position k (and after) leaves every earlier position's output as it
// was, to the bit; and an upstream gradient on positions before k gives exactly zero input
// gradient at k and after, and parameter gradients that do not depend on those inputs.
TEST(SeqAttention, MaskIsCausal) {
  // 7 positions: one row block; 130: two (the layer's products skip the masked block).
  for (const int64_t T : {int64_t(7), int64_t(130)}) {
    SCOPED_TRACE(fmt::format("{} positions", T));
    const int64_t D = 8, batch = 2;
    CausalSelfAttention layer(D, 2);
    layer.build({T, D});
    std::vector<float> params(size_t(layer.num_params())), grads(params.size());
    layer.bind(params.data(), grads.data());
    Rng rng(3, 0, RngPurpose::kInit);
    layer.init_params(rng, cpu_backend());
    const auto x = random_vector(batch * T * D, 61, -2.0f, 2.0f);
    for (int64_t k = 1; k < T; ++k) {
      SCOPED_TRACE(fmt::format("positions {}.. changed", k));
      auto x2 = x;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t t = k; t < T; ++t)
          for (int64_t d = 0; d < D; ++d) x2[size_t((b * T + t) * D + d)] += 3.0f + float(d);
      std::vector<float> y1(x.size()), y2(x.size());
      layer.forward(make_context(), x.data(), y1.data(), batch);
      layer.forward(make_context(), x2.data(), y2.data(), batch);
      bool later_changed = false;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t d = 0; d < D; ++d) {
            const size_t i = size_t((b * T + t) * D + d);
            if (t < k) {
              ASSERT_EQ(y1[i], y2[i]) << "sample " << b << " position " << t;
            } else {
              later_changed = later_changed || y1[i] != y2[i];
            }
          }
      EXPECT_TRUE(later_changed) << "the changed positions' own outputs must change";

      // Gradient from the outputs before k only.
      auto dy = random_vector(int64_t(x.size()), 62);
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t t = k; t < T; ++t)
          for (int64_t d = 0; d < D; ++d) dy[size_t((b * T + t) * D + d)] = 0.0f;
      auto grads_for = [&](const std::vector<float>& in, std::vector<float>& dx) {
        std::vector<float> y(in.size());
        layer.forward(make_context(), in.data(), y.data(), batch);
        layer.backward(make_context(), in.data(), y.data(), dy.data(), dx.data(), batch);
        return grads;
      };
      std::vector<float> dx1(x.size()), dx2(x.size());
      const auto g1 = grads_for(x, dx1);
      const auto g2 = grads_for(x2, dx2);
      EXPECT_EQ(g1, g2) << "parameter gradients of earlier outputs depend on later inputs";
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t d = 0; d < D; ++d) {
            const size_t i = size_t((b * T + t) * D + d);
            if (t >= k) {
              ASSERT_EQ(dx1[i], 0.0f) << "earlier outputs reach position " << t;
            } else {
              ASSERT_EQ(dx1[i], dx2[i]) << "position " << t;
            }
          }
    }
  }
}

// The first position sees only itself: its attention output is its own V through W_out.
TEST(SeqAttention, FirstPositionAttendsToItselfOnly) {
  const int64_t D = 4;
  CausalSelfAttention layer(D, 2);
  layer.build({3, D});
  std::vector<float> params = random_vector(layer.num_params(), 63), grads(params.size());
  layer.bind(params.data(), grads.data());
  const auto x = random_vector(3 * D, 64);
  std::vector<float> y(x.size());
  layer.forward(make_context(), x.data(), y.data(), 1);
  // v = W_v x0 + b_v, y0 = W_out v + b_out, by hand.
  const float* w_in = params.data();
  const float* b_in = w_in + 3 * D * D;
  const float* w_out = b_in + 3 * D;
  const float* b_out = w_out + D * D;
  for (int64_t o = 0; o < D; ++o) {
    double acc = b_out[o];
    for (int64_t j = 0; j < D; ++j) {
      double v = b_in[2 * D + j];
      for (int64_t i = 0; i < D; ++i) v += double(w_in[(2 * D + j) * D + i]) * x[size_t(i)];
      acc += double(w_out[o * D + j]) * v;
    }
    EXPECT_NEAR(y[size_t(o)], acc, 1e-5) << "output " << o;
  }
}

// ---- ids ----

TEST(SeqEmbedding, BadIdsAreInputErrorsNamingTheId) {
  Embedding layer(5, 2);
  layer.build({3});
  std::vector<float> table(10), grads(10);
  layer.bind(table.data(), grads.data());
  std::vector<float> y(6);
  for (float bad : {5.0f, -1.0f, 2.5f, std::numeric_limits<float>::quiet_NaN(), 1e9f}) {
    const std::vector<float> ids = {0, 4, bad};
    try {
      layer.forward(make_context(), ids.data(), y.data(), 1);
      ADD_FAILURE() << "id " << bad << " was accepted";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("Embedding(vocab 5"), std::string::npos) << what;
      EXPECT_NE(what.find(fmt::format("token id {}", bad)), std::string::npos) << what;
      EXPECT_NE(what.find("position 2"), std::string::npos) << what;
    }
  }
}

// ---- the graph: factory, errors, accounting, training ----

// A pre-LayerNorm decoder (GPT-2's arrangement), `blocks` blocks of width `dim`.
std::string transformer_toml(int vocab, int time, int dim, int heads, int blocks,
                             int max_len = -1) {
  std::string s = fmt::format(
      "[[layer]]\ntype = \"embedding\"\nname = \"tok\"\nvocab = {}\ndim = {}\n"
      "[[layer]]\ntype = \"position_embedding\"\nname = \"pos\"\nmax_len = {}\ndim = {}\n",
      vocab, dim, max_len > 0 ? max_len : time, dim);
  std::string x = "pos";
  for (int b = 0; b < blocks; ++b) {
    s += fmt::format(
        "[[layer]]\ntype = \"layernorm\"\nname = \"ln{0}a\"\ninput = \"{1}\"\n"
        "[[layer]]\ntype = \"attention\"\nname = \"att{0}\"\ndim = {2}\nheads = {3}\n"
        "[[layer]]\ntype = \"add\"\nname = \"res{0}a\"\ninputs = [\"{1}\", \"att{0}\"]\n"
        "[[layer]]\ntype = \"layernorm\"\nname = \"ln{0}b\"\n"
        "[[layer]]\ntype = \"linear\"\nname = \"fc{0}\"\nout = {4}\n"
        "[[layer]]\ntype = \"gelu\"\nname = \"gelu{0}\"\n"
        "[[layer]]\ntype = \"linear\"\nname = \"proj{0}\"\nout = {2}\n"
        "[[layer]]\ntype = \"add\"\nname = \"res{0}b\"\ninputs = [\"res{0}a\", \"proj{0}\"]\n",
        b, x, dim, heads, 4 * dim);
    x = fmt::format("res{}b", b);
  }
  s += fmt::format(
      "[[layer]]\ntype = \"layernorm\"\nname = \"lnf\"\n"
      "[[layer]]\ntype = \"linear\"\nname = \"head\"\nout = {}\n",
      vocab);
  return s;
}

TEST(SeqGraph, LayersAndShapesFromToml) {
  const int V = 11, T = 6, D = 8;
  Model m(cpu_backend(), {T}, V,
          build_nodes(graph_from_string(transformer_toml(V, T, D, 2, 2), "tiny.toml"), {T}));
  EXPECT_EQ(m.output_positions(), T);
  EXPECT_EQ(m.output_shape(m.find_layer("tok")), (Shape{T, D}));
  EXPECT_EQ(m.output_shape(m.find_layer("fc1")), (Shape{T, 4 * D}));
  EXPECT_EQ(m.output_shape(m.find_layer("head")), (Shape{T, V}));
  EXPECT_EQ(m.layers()[size_t(m.find_layer("att0"))]->kind(), "Attention");
  // Parameters, counted from the shapes: tables, per block 2 LayerNorms, attention (4 D^2 +
  // 4 D), the MLP (D -> 4D -> D with biases); the final LayerNorm and the head.
  const int64_t block = 2 * 2 * D + (4 * D * D + 4 * D) + (D * 4 * D + 4 * D) + (4 * D * D + D);
  EXPECT_EQ(m.num_params(), V * D + T * D + 2 * block + 2 * D + (D * V + V));
  // Attention's forward FLOPs: Q K V and output projections, then Q K^T and P V, T x T x D each.
  const int64_t att = 2 * T * D * 3 * D + 2 * T * D * D + 2 * T * T * D + 2 * T * T * D;
  EXPECT_EQ(m.layers()[size_t(m.find_layer("att0"))]->flops_per_sample(), att);
  // Activations: every output, plus attention's Q K V, probabilities and head outputs and
  // LayerNorm's two statistics per row.
  int64_t outputs = 0;
  for (size_t i = 0; i < m.layers().size(); ++i) outputs += numel(m.output_shape(int(i)));
  const int64_t saved = 2 * (3 * T * D + 2 * T * T + T * D) + 5 * 2 * T;
  EXPECT_EQ(m.activation_floats_per_sample(), outputs + saved);
  EXPECT_NE(m.summary().find("Attention(dim 8, heads 2)"), std::string::npos);
}

// What the performance model reads of a config: the same counts, without a Model.
TEST(SeqGraph, DescribedLayersCarryTheCounts) {
  const int V = 11, T = 6, D = 8;
  const Config cfg = Config::from_string(transformer_toml(V, T, D, 2, 1), "run.toml");
  const auto layers = describe_layers(plan::read_model_spec(cfg), {T}, V);
  bool seen = false;
  for (const auto& l : layers) {
    if (l.name != "att0") continue;
    seen = true;
    EXPECT_EQ(l.kind, "Attention");
    EXPECT_EQ(l.in, T * D);
    EXPECT_EQ(l.out, T * D);
    EXPECT_EQ(l.params, 4 * D * D + 4 * D);
    EXPECT_EQ(l.flops, 2 * T * D * 3 * D + 2 * T * D * D + 4 * T * T * D);
  }
  EXPECT_TRUE(seen);
}

TEST(SeqGraph, BadTablesAreErrorsNamingTheLayer) {
  auto error_of = [](const std::string& toml, const Shape& in) -> std::string {
    try {
      build_nodes(graph_from_string(toml, "bad.toml"), in);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  // More positions than the table has.
  std::string e = error_of(transformer_toml(5, 10, 8, 2, 1, 8), {10});
  EXPECT_NE(e.find("'pos'"), std::string::npos) << e;
  EXPECT_NE(e.find("max_len"), std::string::npos) << e;
  const std::string head = "[[layer]]\ntype = \"embedding\"\nvocab = 5\ndim = 8\n";
  e = error_of(head + "[[layer]]\ntype = \"attention\"\ndim = 8\nheads = 2\ndropout = 0.1\n", {4});
  EXPECT_NE(e.find("attention_0"), std::string::npos) << e;
  EXPECT_NE(e.find("not implemented"), std::string::npos) << e;
  e = error_of(head + "[[layer]]\ntype = \"attention\"\ndim = 8\nheads = 3\n", {4});
  EXPECT_NE(e.find("does not divide"), std::string::npos) << e;
  e = error_of(head + "[[layer]]\ntype = \"attention\"\ndim = 6\nheads = 2\n", {4});
  EXPECT_NE(e.find("[time, 6]"), std::string::npos) << e;
  e = error_of("[[layer]]\ntype = \"embedding\"\nvocab = 5\ndim = 8\n", {2, 3});
  EXPECT_NE(e.find("[time]"), std::string::npos) << e;
  e = error_of(head + "[[layer]]\ntype = \"layernorm\"\ngain = 2\n", {4});
  EXPECT_NE(e.find("gain"), std::string::npos) << e;
  // dropout = 0 is accepted.
  EXPECT_EQ(error_of(head + "[[layer]]\ntype = \"attention\"\ndim = 8\nheads = 2\ndropout = 0.0\n"
                            "[[layer]]\ntype = \"linear\"\nout = 5\n",
                     {4}),
            "");
}

TEST(SeqGraph, BadTokenIdNamesTheLayer) {
  const int V = 5, T = 4;
  Model m(cpu_backend(), {T}, V,
          build_nodes(graph_from_string(transformer_toml(V, T, 8, 2, 1), "tiny.toml"), {T}));
  m.init_params(1);
  const std::vector<float> ids = {0, 1, 2, 3, 4, 0, 7, 1};
  try {
    m.forward(ids.data(), 2, StepInfo{});
    FAIL() << "id 7 was accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("layer 'tok'"), std::string::npos) << what;
    EXPECT_NE(what.find("token id 7"), std::string::npos) << what;
  }
}

// The ignore index through the Model: ignored positions add no loss and get zero gradient;
// the mean's gradient is the sum's over the counted labels; without an ignore index nothing
// changes.
TEST(SeqGraph, IgnoredLabelsAndTheMeanOverCountedTokens) {
  const int V = 6, T = 5;
  Model m(cpu_backend(), {T}, V,
          build_nodes(graph_from_string(transformer_toml(V, T, 8, 2, 1), "tiny.toml"), {T}));
  m.init_params(2);
  const std::vector<float> ids = {0, 1, 2, 3, 4, 5, 4, 3, 2, 1};
  const std::vector<int32_t> all = {1, 2, 3, 4, 5, 4, 3, 2, 1, 0};
  const std::vector<int32_t> some = {1, -1, 3, 4, -1, 4, 3, -1, 1, 0};
  const int64_t n = 2 * T * V;
  m.forward(ids.data(), 2, StepInfo{});
  // The parameter gradients that backward makes from the loss's gradient.
  auto grad_of_logits = [&](const int32_t* labels, bool mean, LossResult* r) {
    *r = mean ? m.loss_mean_over_counted(labels, 1.0f) : m.loss(labels, 1.0f);
    m.backward();
    std::vector<float> g(size_t(m.num_params()));
    cpu_backend().copy_to_host(g.data(), m.grads(), g.size() * sizeof(float));
    return g;
  };
  LossResult plain, full, part, part_mean;
  const auto g_plain = grad_of_logits(all.data(), false, &plain);
  EXPECT_EQ(plain.counted, 2 * T);
  m.set_ignore_index(-1);
  const auto g_full = grad_of_logits(all.data(), false, &full);
  EXPECT_EQ(full.loss_sum, plain.loss_sum);
  EXPECT_EQ(full.counted, 2 * T);
  EXPECT_EQ(g_full, g_plain);
  const auto g_part = grad_of_logits(some.data(), false, &part);
  EXPECT_EQ(part.counted, 7);
  EXPECT_LT(part.loss_sum, full.loss_sum);
  const auto g_mean = grad_of_logits(some.data(), true, &part_mean);
  EXPECT_EQ(part_mean.loss_sum, part.loss_sum);
  for (size_t i = 0; i < g_part.size(); ++i)
    ASSERT_NEAR(g_mean[i], g_part[i] / 7.0f, 1e-6f * (1.0f + std::fabs(g_part[i]))) << i;
  // The loss of the counted rows alone: the same rows' losses with no ignored row among them.
  double expect = 0;
  {
    std::vector<float> logits(static_cast<size_t>(n));
    cpu_backend().copy_to_host(logits.data(), m.forward(ids.data(), 2, StepInfo{}),
                               logits.size() * sizeof(float));
    std::vector<float> dz(static_cast<size_t>(V));
    for (int64_t r = 0; r < 2 * T; ++r)
      if (some[size_t(r)] >= 0)
        expect += cpu_backend().softmax_xent(logits.data() + r * V, &some[size_t(r)], 1, V, 1.0f,
                                             dz.data(), nullptr);
  }
  EXPECT_NEAR(part.loss_sum, expect, 1e-9 * expect);
  // Another label outside the classes is still an error.
  std::vector<int32_t> bad = some;
  bad[3] = V;
  m.forward(ids.data(), 2, StepInfo{});
  EXPECT_THROW(m.loss(bad.data(), 1.0f), InputError);
  bad[3] = -2;
  EXPECT_THROW(m.loss(bad.data(), 1.0f), InputError);
}

TEST(SeqGraph, IgnoreIndexFromTheConfig) {
  const Config cfg = Config::from_string(
      transformer_toml(5, 4, 8, 2, 1) + "[loss]\nignore_index = -100\n", "run.toml");
  auto m = build_model(plan::read_model_spec(cfg), cpu_backend(), {4}, 5);
  EXPECT_TRUE(m->has_ignore_index());
  EXPECT_EQ(m->ignore_index(), -100);
  auto plain = build_model(
      plan::read_model_spec(Config::from_string(transformer_toml(5, 4, 8, 2, 1), "run.toml")),
      cpu_backend(), {4}, 5);
  EXPECT_FALSE(plain->has_ignore_index());
}

// The zoo's gpt-char: 128 byte tokens in, 128 x 256 logits out, and the parameters of GPT-2's
// block layout at width 128 counted by hand: embeddings 256*128 + 128*128; per block two
// LayerNorms (2*128 each), attention (3*128*128 + 3*128 + 128*128 + 128), the MLP
// (128*512 + 512 + 512*128 + 128); the final LayerNorm and the head (128*256 + 256).
TEST(SeqGraph, GptCharFromTheZoo) {
  const Config cfg = Config::from_string("model = \"gpt-char\"\n", "run.toml");
  auto m = build_model(plan::read_model_spec(cfg), cpu_backend(), {128}, 256);
  const int64_t block =
      2 * 256 + (3 * 128 * 128 + 3 * 128 + 128 * 128 + 128) + (128 * 512 + 512 + 512 * 128 + 128);
  EXPECT_EQ(m->num_params(), 256 * 128 + 128 * 128 + 4 * block + 256 + 128 * 256 + 256);
  EXPECT_EQ(m->output_positions(), 128);
  EXPECT_EQ(m->output_shape(int(m->layers().size()) - 1), (Shape{128, 256}));
  EXPECT_GE(m->find_layer("b3_attn"), 0);
  // Another vocabulary than the graph's 256 is a shape error at the head.
  EXPECT_THROW(build_model(plan::read_model_spec(cfg), cpu_backend(), {128}, 65), ConfigError);
}

// Two blocks learn a repeated sequence in which the current token does not determine the next
// one (0 is followed by 1, 2 and 3 in turn): the model must look back through attention. A
// window's first position has nothing to look back at, so its label is ignored.
TEST(SeqGraph, TinyTransformerLearnsARepeatedSequence) {
  // One thread, as a worker computes: small GEMMs gain nothing from more.
  cpu_backend().set_intra_op_threads(1);
  const int V = 8, T = 12, D = 32, batch = 6;
  const std::vector<int> pattern = {0, 1, 0, 2, 0, 3};
  Model m(cpu_backend(), {T}, V,
          build_nodes(graph_from_string(transformer_toml(V, T, D, 4, 2), "tiny.toml"), {T}));
  m.init_params(7);
  // Window b starts at offset b of the repeated pattern; labels are the next tokens.
  std::vector<float> ids(size_t(batch * T));
  std::vector<int32_t> labels(ids.size());
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < T; ++t) {
      ids[size_t(b * T + t)] = float(pattern[size_t((b + t) % 6)]);
      labels[size_t(b * T + t)] = t == 0 ? -1 : pattern[size_t((b + t + 1) % 6)];
    }
  m.set_ignore_index(-1);
  const int64_t np = m.num_params();
  std::vector<float> adam_m(size_t(np), 0.0f), adam_v(size_t(np), 0.0f);
  double first = 0, last = 0;
  int64_t correct = 0;
  for (int step = 1; step <= 200; ++step) {
    m.forward(ids.data(), batch, StepInfo{});
    const LossResult r = m.loss_mean_over_counted(labels.data(), 1.0f);
    m.backward();
    cpu_backend().adam_update(m.params(), m.grads(), adam_m.data(), adam_v.data(), np, 3e-3f, 0.9f,
                              0.999f, 1e-8f, 0.0f, false, step);
    if (step == 1) first = r.loss_sum / double(r.counted);
    last = r.loss_sum / double(r.counted);
    correct = r.correct;
  }
  RecordProperty("first_loss", std::to_string(first));
  RecordProperty("last_loss", std::to_string(last));
  EXPECT_GT(first, 1.0);  // it started near log(8)
  EXPECT_LT(last, 0.02) << "first " << first;
  EXPECT_EQ(correct, batch * (T - 1));
}

}  // namespace
}  // namespace loom::nn
