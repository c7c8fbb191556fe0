// The sequence-model ops of the Backend interface (embeddings, layer norm, batched GEMM, the
// causal softmax, the token loss with an ignored label) on the CUDA backend against the CPU
// backend, with the same inputs: bit-exact where the kernel does the CPU's float arithmetic in
// the CPU's order (the embedding lookup and its gradient), within a named budget elsewhere;
// then a training step of a two-block transformer. Skipped without a GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "loom/core/config.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/nn/layers/embedding.h"
#include "loom/nn/layers/fixed_bias.h"
#include "loom/nn/layers/pad.h"
#include "loom/nn/layers/relative_position_bias.h"
#include "loom/plan/model_reader.h"
#include "tensor_cuda/gpu_compare.h"

namespace loom::test {
namespace {

std::vector<float> token_ids(size_t n, int64_t vocab, uint64_t seed) {
  Rng rng(seed, 0, RngPurpose::kTest);
  std::vector<float> ids(n);
  for (float& v : ids) v = float(rng.below(uint64_t(vocab)));
  return ids;
}

TEST(CudaSeqOps, EmbeddingIsBitExact) {
  LOOM_REQUIRE_GPU();
  const int64_t n = 3000, vocab = 97, dim = 40;
  const auto ids = token_ids(size_t(n), vocab, 1);
  const auto table = random_floats(size_t(vocab * dim), 2);
  const auto dy = random_floats(size_t(n * dim), 3);
  std::vector<float> y(size_t(n * dim)), dtable(table.size());
  ASSERT_EQ(cpu().embedding_forward(ids.data(), table.data(), n, vocab, dim, y.data()), -1);
  cpu().embedding_backward(ids.data(), dy.data(), n, vocab, dim, dtable.data());
  auto d_ids = upload(gpu(), ids), d_table = upload(gpu(), table), d_dy = upload(gpu(), dy);
  auto d_y = guarded<float>(gpu(), y.size());
  auto d_dtable = guarded<float>(gpu(), dtable.size());
  EXPECT_EQ(gpu().embedding_forward(d_ids.data(), d_table.data(), n, vocab, dim, d_y.data()), -1);
  gpu().embedding_backward(d_ids.data(), d_dy.data(), n, vocab, dim, d_dtable.data());
  EXPECT_BITS_EQ(download(gpu(), d_y, y.size()), y);
  EXPECT_BITS_EQ(download(gpu(), d_dtable, dtable.size()), dtable);
  EXPECT_CANARY(gpu(), d_y, y.size());
  EXPECT_CANARY(gpu(), d_dtable, dtable.size());
}

TEST(CudaSeqOps, EmbeddingFindsTheFirstBadId) {
  LOOM_REQUIRE_GPU();
  const int64_t n = 500, vocab = 10, dim = 3;
  auto ids = token_ids(size_t(n), vocab, 4);
  const auto table = random_floats(size_t(vocab * dim), 5);
  auto d_table = upload(gpu(), table);
  DeviceBuffer<float> d_y(gpu(), n * dim);
  for (float bad : {10.0f, -1.0f, 0.5f, std::numeric_limits<float>::quiet_NaN()}) {
    auto with = ids;
    with[400] = bad;
    with[123] = bad;
    auto d_ids = upload(gpu(), with);
    EXPECT_EQ(gpu().embedding_forward(d_ids.data(), d_table.data(), n, vocab, dim, d_y.data()), 123)
        << bad;
  }
}

// One forward and backward of a layer with parameters (and state, if any) on `be`: y, dx and the
// parameters' gradient.
struct LayerStep {
  std::vector<float> y, dx, dparams;
};
LayerStep layer_step(Backend& be, nn::Layer& layer, const nn::Shape& in_shape, int64_t batch,
                     const std::vector<float>& x, const std::vector<float>& params,
                     const std::vector<float>& dy, const std::vector<float>& state = {}) {
  const int64_t out = nn::numel(layer.build(in_shape)) * batch;
  auto d_params = upload(be, params), d_x = upload(be, x), d_dy = upload(be, dy);
  auto d_state = upload(be, state);
  if (!state.empty()) layer.bind_state(d_state.data());
  DeviceBuffer<float> d_dparams(be, int64_t(params.size())), d_y(be, out),
      d_dx(be, int64_t(x.size()));
  layer.bind(d_params.data(), d_dparams.data());
  nn::Context ctx;
  ctx.backend = &be;
  layer.forward(ctx, d_x.data(), d_y.data(), batch);
  layer.backward(ctx, d_x.data(), d_y.data(), d_dy.data(), d_dx.data(), batch);
  return {download(be, d_y, size_t(out)), download(be, d_dx, x.size()),
          download(be, d_dparams, params.size())};
}

// ViT's class token: row copies, and the rows' gradient summed over the batch.
TEST(CudaSeqOps, ClassTokenMatchesCpu) {
  LOOM_REQUIRE_GPU();
  const int64_t batch = 5, count = 2, time = 7, dim = 12;
  const auto x = random_floats(size_t(batch * time * dim), 4);
  const auto table = random_floats(size_t(count * dim), 5);
  const auto dy = random_floats(size_t(batch * (count + time) * dim), 6);
  nn::ClassToken on_cpu(count, dim), on_gpu(count, dim);
  const LayerStep c = layer_step(cpu(), on_cpu, {time, dim}, batch, x, table, dy);
  const LayerStep g = layer_step(gpu(), on_gpu, {time, dim}, batch, x, table, dy);
  EXPECT_BITS_EQ(g.y, c.y);
  EXPECT_BITS_EQ(g.dx, c.dx);
  EXPECT_NMSE_LE(g.dparams, c.dparams, kNmseReduction);
}

// Window attention's relative position bias: a gather, a broadcast add, and the table's
// gradient summed over blocks and scattered back.
TEST(CudaSeqOps, RelativePositionBiasMatchesCpu) {
  LOOM_REQUIRE_GPU();
  const int64_t batch = 3, w = 4, heads = 3, n = w * w, per = 2 * heads * n * n;
  const auto x = random_floats(size_t(batch * per), 7);
  const auto table = random_floats(size_t((2 * w - 1) * (2 * w - 1) * heads), 8);
  const auto dy = random_floats(size_t(batch * per), 9);
  nn::RelativePositionBias on_cpu(w, heads), on_gpu(w, heads);
  const LayerStep c = layer_step(cpu(), on_cpu, {2, heads, n, n}, batch, x, table, dy);
  const LayerStep g = layer_step(gpu(), on_gpu, {2, heads, n, n}, batch, x, table, dy);
  EXPECT_BITS_EQ(g.y, c.y);
  EXPECT_BITS_EQ(g.dx, c.dx);
  EXPECT_NMSE_LE(g.dparams, c.dparams, kNmseReduction);
}

// Swin's shifted-window mask as imported: a fixed addend per sample, the gradient passed through.
TEST(CudaSeqOps, FixedBiasMatchesCpu) {
  LOOM_REQUIRE_GPU();
  const int64_t batch = 3, per = 4 * 2 * 16 * 16;
  const auto x = random_floats(size_t(batch * per), 10);
  const auto bias = random_floats(size_t(per), 11);
  const auto dy = random_floats(size_t(batch * per), 12);
  nn::FixedBias on_cpu, on_gpu;
  const LayerStep c = layer_step(cpu(), on_cpu, {4, 2, 16, 16}, batch, x, {}, dy, bias);
  const LayerStep g = layer_step(gpu(), on_gpu, {4, 2, 16, 16}, batch, x, {}, dy, bias);
  EXPECT_BITS_EQ(g.y, c.y);
  EXPECT_BITS_EQ(g.dx, c.dx);
}

// Swin's padding of a channels-last map to whole windows: zeros, strided row copies and back.
TEST(CudaSeqOps, PadMatchesCpu) {
  LOOM_REQUIRE_GPU();
  const int64_t batch = 3, h = 9, w = 9, c = 8;
  const auto x = random_floats(size_t(batch * h * w * c), 13);
  const auto dy = random_floats(size_t(batch * 12 * 12 * c), 14);
  nn::Pad on_cpu({0, 0, 0}, {3, 3, 0}), on_gpu({0, 0, 0}, {3, 3, 0});
  const LayerStep cp = layer_step(cpu(), on_cpu, {h, w, c}, batch, x, {}, dy);
  const LayerStep gp = layer_step(gpu(), on_gpu, {h, w, c}, batch, x, {}, dy);
  EXPECT_BITS_EQ(gp.y, cp.y);
  EXPECT_BITS_EQ(gp.dx, cp.dx);
}

TEST(CudaSeqOps, LayerNormMatchesCpu) {
  LOOM_REQUIRE_GPU();
  for (auto [rows, cols, offset] :
       {std::tuple<int64_t, int64_t, float>{300, 64, 0.0f}, {7, 1000, 50.0f}, {2000, 5, -3.0f}}) {
    SCOPED_TRACE(fmt::format("{} x {}", rows, cols));
    auto x = random_floats(size_t(rows * cols), 10, -2.0f + offset, 2.0f + offset);
    const auto gamma = random_floats(size_t(cols), 11, 0.5f, 1.5f);
    const auto beta = random_floats(size_t(cols), 12);
    const auto dy = random_floats(x.size(), 13);
    const auto r = static_cast<size_t>(rows), c = static_cast<size_t>(cols);
    std::vector<float> y(x.size()), mean(r), rstd(r), dx(x.size()), dg(c), db(c);
    cpu().layernorm_forward(x.data(), rows, cols, 1e-5f, gamma.data(), beta.data(), y.data(),
                            mean.data(), rstd.data());
    cpu().layernorm_backward(x.data(), dy.data(), rows, cols, gamma.data(), mean.data(),
                             rstd.data(), dx.data(), dg.data(), db.data());
    auto d_x = upload(gpu(), x), d_g = upload(gpu(), gamma), d_b = upload(gpu(), beta),
         d_dy = upload(gpu(), dy);
    auto d_y = guarded<float>(gpu(), y.size()), d_mean = guarded<float>(gpu(), mean.size()),
         d_rstd = guarded<float>(gpu(), rstd.size()), d_dx = guarded<float>(gpu(), dx.size()),
         d_dg = guarded<float>(gpu(), dg.size()), d_db = guarded<float>(gpu(), db.size());
    gpu().layernorm_forward(d_x.data(), rows, cols, 1e-5f, d_g.data(), d_b.data(), d_y.data(),
                            d_mean.data(), d_rstd.data());
    EXPECT_NMSE_LE(download(gpu(), d_mean, mean.size()), mean, kNmseReduction);
    EXPECT_NMSE_LE(download(gpu(), d_rstd, rstd.size()), rstd, kNmseReduction);
    EXPECT_NMSE_LE(download(gpu(), d_y, y.size()), y, kNmseReduction);
    // Backward from the CPU's statistics on both, so only backward is compared.
    auto c_mean = upload(gpu(), mean), c_rstd = upload(gpu(), rstd);
    gpu().layernorm_backward(d_x.data(), d_dy.data(), rows, cols, d_g.data(), c_mean.data(),
                             c_rstd.data(), d_dx.data(), d_dg.data(), d_db.data());
    EXPECT_NMSE_LE(download(gpu(), d_dx, dx.size()), dx, kNmseReduction);
    EXPECT_NMSE_LE(download(gpu(), d_dg, dg.size()), dg, kNmseReduction);
    EXPECT_NMSE_LE(download(gpu(), d_db, db.size()), db, kNmseReduction);
    EXPECT_CANARY(gpu(), d_y, y.size());
    EXPECT_CANARY(gpu(), d_dx, dx.size());
    EXPECT_CANARY(gpu(), d_dg, dg.size());
    EXPECT_CANARY(gpu(), d_mean, mean.size());
  }
}

TEST(CudaSeqOps, BatchedGemmMatchesCpu) {
  LOOM_REQUIRE_GPU();
  // Padded leading dimensions and gaps between the matrices, as attention's heads lie side by
  // side in rows of Q K V.
  const int64_t m = 33, n = 16, k = 40, batch = 4;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(fmt::format("trans_a {} trans_b {}", ta, tb));
      const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k;
      const int64_t b_rows = tb ? n : k, b_cols = tb ? k : n;
      const int64_t lda = a_cols + 3, ldb = b_cols + 5, ldc = n + 2;
      const int64_t sa = a_rows * lda + 7, sb = b_rows * ldb + 1, sc = m * ldc + 4;
      const auto a = random_floats(size_t(sa * batch), 20);
      const auto b = random_floats(size_t(sb * batch), 21);
      auto c = random_floats(size_t(sc * batch), 22);
      auto d_a = upload(gpu(), a), d_b = upload(gpu(), b);
      auto d_c = upload_guarded(gpu(), c);
      cpu().gemm_batched(ta, tb, m, n, k, 0.5f, a.data(), lda, sa, b.data(), ldb, sb, 0.25f,
                         c.data(), ldc, sc, batch);
      gpu().gemm_batched(ta, tb, m, n, k, 0.5f, d_a.data(), lda, sa, d_b.data(), ldb, sb, 0.25f,
                         d_c.data(), ldc, sc, batch);
      EXPECT_NMSE_LE(download(gpu(), d_c, c.size()), c, kNmseGemm);
      EXPECT_CANARY(gpu(), d_c, c.size());
    }
}

TEST(CudaSeqOps, CausalSoftmaxMatchesCpu) {
  LOOM_REQUIRE_GPU();
  for (int64_t t : {1, 7, 33, 128}) {
    SCOPED_TRACE(fmt::format("t {}", t));
    const int64_t blocks = 5, n = blocks * t * t;
    const auto x = random_floats(size_t(n), 30, -8.0f, 8.0f);
    const auto dy = random_floats(size_t(n), 31);
    std::vector<float> y(static_cast<size_t>(n)), dx(static_cast<size_t>(n));
    cpu().causal_softmax_forward(x.data(), y.data(), blocks, t);
    cpu().causal_softmax_backward(y.data(), dy.data(), dx.data(), blocks, t);
    auto d_x = upload(gpu(), x), d_dy = upload(gpu(), dy);
    auto d_y = guarded<float>(gpu(), size_t(n)), d_dx = guarded<float>(gpu(), size_t(n));
    gpu().causal_softmax_forward(d_x.data(), d_y.data(), blocks, t);
    const auto got_y = download(gpu(), d_y, size_t(n));
    EXPECT_NMSE_LE(got_y, y, kNmseSoftmax);
    for (int64_t r = 0; r < blocks * t; ++r)
      for (int64_t j = r % t + 1; j < t; ++j) ASSERT_EQ(got_y[size_t(r * t + j)], 0.0f);
    auto c_y = upload(gpu(), y);
    gpu().causal_softmax_backward(c_y.data(), d_dy.data(), d_dx.data(), blocks, t);
    EXPECT_NMSE_LE(download(gpu(), d_dx, size_t(n)), dx, kNmseSoftmax);
    // In place, as the attention layer calls them.
    gpu().causal_softmax_forward(d_x.data(), d_x.data(), blocks, t);
    EXPECT_NMSE_LE(download(gpu(), d_x, size_t(n)), y, kNmseSoftmax);
    EXPECT_CANARY(gpu(), d_y, n);
    EXPECT_CANARY(gpu(), d_dx, n);
  }
}

TEST(CudaSeqOps, IgnoredLabelsMatchCpu) {
  LOOM_REQUIRE_GPU();
  const int64_t rows = 700, cols = 50;
  const auto z = random_floats(size_t(rows * cols), 40, -4.0f, 4.0f);
  std::vector<int32_t> labels(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    labels[size_t(r)] = r % 7 == 3 ? -100 : int32_t((r * 13) % cols);
  for (float smoothing : {0.0f, 0.1f}) {
    SCOPED_TRACE(smoothing);
    std::vector<float> dz(z.size());
    int64_t correct = 0, counted = 0;
    const double loss = cpu().softmax_xent_ignore(z.data(), labels.data(), rows, cols, 0.25f,
                                                  dz.data(), &correct, smoothing, -100, &counted);
    auto d_z = upload(gpu(), z);
    auto d_l = upload(gpu(), labels);
    auto d_dz = guarded<float>(gpu(), dz.size());
    int64_t g_correct = 0, g_counted = 0;
    const double g_loss =
        gpu().softmax_xent_ignore(d_z.data(), d_l.data(), rows, cols, 0.25f, d_dz.data(),
                                  &g_correct, smoothing, -100, &g_counted);
    EXPECT_EQ(g_counted, counted);
    EXPECT_EQ(g_correct, correct);
    EXPECT_NEAR(g_loss, loss, 1e-9 * loss);
    EXPECT_NMSE_LE(download(gpu(), d_dz, dz.size()), dz, kNmseSoftmax);
    EXPECT_CANARY(gpu(), d_dz, dz.size());
  }
  auto bad = labels;
  bad[5] = int32_t(cols);
  auto d_z = upload(gpu(), z);
  auto d_bad = upload(gpu(), bad);
  DeviceBuffer<float> d_dz(gpu(), rows * cols);
  EXPECT_THROW(gpu().softmax_xent_ignore(d_z.data(), d_bad.data(), rows, cols, 1.0f, d_dz.data(),
                                         nullptr, 0.0f, -100, nullptr),
               InputError);
}

// A two-block pre-LayerNorm transformer, one training step on each backend.
std::string transformer_graph() {
  std::string s =
      "[[layer]]\ntype = \"embedding\"\nname = \"tok\"\nvocab = 50\ndim = 32\n"
      "[[layer]]\ntype = \"position_embedding\"\nname = \"pos\"\nmax_len = 64\ndim = 32\n";
  std::string x = "pos";
  for (int b = 0; b < 2; ++b) {
    s += fmt::format(
        "[[layer]]\ntype = \"layernorm\"\nname = \"ln{0}a\"\ninput = \"{1}\"\n"
        "[[layer]]\ntype = \"attention\"\nname = \"att{0}\"\ndim = 32\nheads = 4\n"
        "[[layer]]\ntype = \"add\"\nname = \"res{0}a\"\ninputs = [\"{1}\", \"att{0}\"]\n"
        "[[layer]]\ntype = \"layernorm\"\nname = \"ln{0}b\"\n"
        "[[layer]]\ntype = \"linear\"\nname = \"fc{0}\"\nout = 128\n"
        "[[layer]]\ntype = \"gelu\"\nname = \"gelu{0}\"\n"
        "[[layer]]\ntype = \"linear\"\nname = \"proj{0}\"\nout = 32\n"
        "[[layer]]\ntype = \"add\"\nname = \"res{0}b\"\ninputs = [\"res{0}a\", \"proj{0}\"]\n",
        b, x);
    x = fmt::format("res{}b", b);
  }
  return s +
         "[[layer]]\ntype = \"layernorm\"\nname = \"lnf\"\n"
         "[[layer]]\ntype = \"linear\"\nname = \"head\"\nout = 50\n";
}

struct SeqStep {
  double loss = 0;
  int64_t counted = 0;
  std::vector<float> grads;
};

SeqStep seq_step(Backend& be) {
  const Config cfg = Config::from_string(transformer_graph(), "cuda_seq_ops_test.toml");
  const int64_t T = 48, batch = 4;
  auto model = nn::build_model(plan::read_model_spec(cfg), be, {T}, 50);
  model->init_params(99);
  model->set_ignore_index(-1);
  const auto ids = token_ids(size_t(batch * T), 50, 50);
  std::vector<int32_t> labels(ids.size());
  for (size_t i = 0; i < ids.size(); ++i)
    labels[i] = i % 11 == 0 ? -1 : int32_t(ids[(i + 1) % ids.size()]);
  auto d_ids = upload(be, ids);
  auto d_labels = upload(be, labels);
  model->forward(d_ids.data(), batch, nn::StepInfo{true, 0, 0});
  const auto loss = model->loss_mean_over_counted(d_labels.data(), 1.0f);
  model->backward();
  SeqStep r;
  r.loss = loss.loss_sum;
  r.counted = loss.counted;
  r.grads.resize(size_t(model->num_params()));
  be.copy_to_host(r.grads.data(), model->grads(), r.grads.size() * sizeof(float));
  return r;
}

TEST(CudaModel, TransformerTrainingStepMatchesCpu) {
  LOOM_REQUIRE_GPU();
  const SeqStep on_cpu = seq_step(cpu_backend());
  const SeqStep on_gpu = seq_step(gpu());
  ASSERT_EQ(on_gpu.grads.size(), on_cpu.grads.size());
  EXPECT_EQ(on_gpu.counted, on_cpu.counted);
  EXPECT_NEAR(on_gpu.loss, on_cpu.loss, 1e-4 * on_cpu.loss);
  EXPECT_NMSE_LE(on_gpu.grads, on_cpu.grads, kNmseModel);
}

}  // namespace
}  // namespace loom::test
