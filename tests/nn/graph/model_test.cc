// Model: the flat buffers, whole-model gradients (with the softmax cross-entropy loss), the
// on_ready contract of backward, and dropout streams that do not depend on the batch split.
#include "loom/nn/graph/model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "loom/core/error.h"
#include "loom/nn/layers/activation.h"
#include "loom/nn/layers/conv2d.h"
#include "loom/nn/layers/linear.h"
#include "nn/grad_check.h"

namespace loom::nn {
namespace {

using testing::expect_gradient_matches;
using testing::random_vector;
using testing::Tolerance;

// Conv -> pool -> ReLU -> Flatten -> Linear -> ReLU -> Dropout -> Linear: every layer kind.
std::unique_ptr<Model> small_cnn(float dropout = 0.25f) {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Conv2d>(1, 2, 3, 1, 1));  // [2, 6, 6]
  layers.push_back(std::make_unique<MaxPool2d>(2));           // [2, 3, 3]
  layers.push_back(std::make_unique<ReLU>());
  layers.push_back(std::make_unique<Flatten>());  // 18
  layers.push_back(std::make_unique<Linear>(18, 6));
  layers.push_back(std::make_unique<ReLU>());
  layers.push_back(std::make_unique<Dropout>(dropout));
  layers.push_back(std::make_unique<Linear>(6, 3));
  return std::make_unique<Model>(cpu_backend(), Shape{1, 6, 6}, 3, std::move(layers));
}

std::unique_ptr<Model> small_mlp(float dropout) {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Flatten>());
  layers.push_back(std::make_unique<Linear>(12, 16));
  layers.push_back(std::make_unique<ReLU>());
  layers.push_back(std::make_unique<Dropout>(dropout));
  layers.push_back(std::make_unique<Linear>(16, 16));
  layers.push_back(std::make_unique<ReLU>());
  layers.push_back(std::make_unique<Dropout>(dropout));
  layers.push_back(std::make_unique<Linear>(16, 5));
  return std::make_unique<Model>(cpu_backend(), Shape{3, 4}, 5, std::move(layers));
}

// The softmax cross-entropy loss: its logits gradient against central differences of the
// loss itself (nonlinear: a smaller step, truncation error O(h^2)).
TEST(SoftmaxXent, GradientMatchesFiniteDifferences) {
  Backend& be = cpu_backend();
  const int64_t rows = 4, cols = 6;
  std::vector<float> z = random_vector(rows * cols, 20, -3.0f, 3.0f);
  const std::vector<int32_t> labels = {0, 5, 2, 2};
  std::vector<float> dz(z.size()), scratch(z.size());
  const float scale = 1.0f / float(rows);
  be.softmax_xent(z.data(), labels.data(), rows, cols, scale, dz.data(), nullptr, 0.0f);
  auto loss = [&]() {
    return be.softmax_xent(z.data(), labels.data(), rows, cols, scale, scratch.data(), nullptr,
                           0.0f) /
           double(rows);
  };
  expect_gradient_matches("dlogits", z, dz, loss, Tolerance{1e-3, 1e-3, 1e-6});
}

// Mean squared error: the value is the mean over columns of (y - t)^2 summed over rows (PyTorch's
// MSELoss 'mean' times rows), and its gradient matches central differences of the loss.
TEST(Mse, ValueAndGradientMatchTheDefinition) {
  Backend& be = cpu_backend();
  const int64_t rows = 3, cols = 5;
  std::vector<float> y = random_vector(rows * cols, 21, -2.0f, 2.0f);
  const std::vector<float> t = random_vector(rows * cols, 22, -2.0f, 2.0f);
  double want = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double row = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double d = double(y[size_t(r * cols + c)]) - double(t[size_t(r * cols + c)]);
      row += d * d;
    }
    want += row / double(cols);
  }
  std::vector<float> dy(y.size()), scratch(y.size());
  const float scale = 1.0f / float(rows);
  EXPECT_NEAR(be.mse(y.data(), t.data(), rows, cols, scale, dy.data()), want, 1e-9 * want);
  auto loss = [&]() {
    return be.mse(y.data(), t.data(), rows, cols, scale, scratch.data()) / double(rows);
  };
  expect_gradient_matches("dy", y, dy, loss, Tolerance{1e-3, 1e-3, 1e-6});
}

// A model trained for regression: mse_loss fills the output gradient that backward takes to
// the parameters, which then match central differences of the mean squared error.
TEST(Model, MseLossGradientsMatchFiniteDifferences) {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Flatten>());
  layers.push_back(std::make_unique<Linear>(6, 4));
  layers.push_back(std::make_unique<ReLU>());
  layers.push_back(std::make_unique<Linear>(4, 2));
  Model m(cpu_backend(), Shape{6}, 2, std::move(layers));
  m.init_params(5);
  const int64_t batch = 3;
  const std::vector<float> x = random_vector(batch * 6, 23, -1.0f, 1.0f);
  const std::vector<float> t = random_vector(batch * 2, 24, -1.0f, 1.0f);
  StepInfo step;
  auto loss = [&]() {
    m.forward(x.data(), batch, step);
    return m.mse_loss(t.data(), 1.0f / float(batch)).loss_sum / double(batch);
  };
  loss();
  m.backward();
  std::vector<float> params(m.params(), m.params() + m.num_params());
  const std::vector<float> grads(m.grads(), m.grads() + m.num_params());
  auto loss_of_params = [&]() {
    std::copy(params.begin(), params.end(), m.params());
    return loss();
  };
  // The default step (1e-2): the loss is quadratic in the outputs and piecewise linear through
  // the ReLU, so a central difference is exact short of a kink, and what is left is the float
  // forward's rounding over 2h, which a smaller step would lift above the tolerance on some
  // GEMM kernels (the summation order differs by ISA).
  expect_gradient_matches("params", params, grads, loss_of_params, Tolerance{});
}

TEST(Model, FlatBuffersAndRanges) {
  auto model = small_cnn();
  // conv 2*1*9 + 2 = 20, linear 18*6 + 6 = 114, linear 6*3 + 3 = 21
  EXPECT_EQ(model->num_params(), 155);
  const auto& ranges = model->param_ranges();
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[0].layer, 0);
  EXPECT_EQ(ranges[0].offset, 0);
  EXPECT_EQ(ranges[0].count, 20);
  EXPECT_EQ(ranges[1].layer, 4);
  EXPECT_EQ(ranges[1].offset, 20);
  EXPECT_EQ(ranges[1].count, 114);
  EXPECT_EQ(ranges[2].layer, 7);
  EXPECT_EQ(ranges[2].offset, 134);
  EXPECT_EQ(ranges[2].count, 21);
  // forward FLOPs: conv 2 * 2*9 * 36 = 1296, linears 2*18*6 + 2*6*3 = 252
  EXPECT_EQ(model->flops_per_sample(), 1296 + 252);
  EXPECT_FALSE(model->summary().empty());

  // Parameters are views into the flat buffer: init writes there, deterministically.
  model->init_params(3);
  std::vector<float> a(model->params(), model->params() + model->num_params());
  EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](float v) { return v != 0.0f; }));
  model->init_params(3);
  EXPECT_EQ(std::vector<float>(model->params(), model->params() + model->num_params()), a);
  model->init_params(4);
  EXPECT_NE(std::vector<float>(model->params(), model->params() + model->num_params()), a);
}

TEST(Model, OutputMustMatchTheClasses) {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Linear>(4, 3));
  EXPECT_THROW(Model(cpu_backend(), Shape{4}, 10, std::move(layers)), ConfigError);
  std::vector<std::unique_ptr<Layer>> bad_input;
  bad_input.push_back(std::make_unique<Linear>(5, 10));
  EXPECT_THROW(Model(cpu_backend(), Shape{4}, 10, std::move(bad_input)), ConfigError);
}

// The whole model, loss included: d(mean loss)/d(every parameter) against central differences.
// Training mode with a fixed dropout key, so every forward draws the same masks. The fixed
// seeds keep every ReLU input and pooling window clear of kinks and ties at this step.
TEST(Model, ParameterGradientsMatchFiniteDifferences) {
  auto model = small_cnn();
  model->init_params(7);
  const int64_t batch = 4;
  std::vector<float> x = random_vector(batch * 36, 21);
  const std::vector<int32_t> labels = {0, 1, 2, 1};
  const StepInfo step{true, derive_key(1, 0, RngPurpose::kDropout, 5), 0};
  auto loss = [&]() {
    model->forward(x.data(), batch, step);
    return model->loss(labels.data(), 1.0f / float(batch)).loss_sum / double(batch);
  };
  loss();
  std::fill(model->grads(), model->grads() + model->num_params(), 99.0f);  // overwritten
  model->backward();
  const std::vector<float> analytic(model->grads(), model->grads() + model->num_params());
  // Backward again from the same forward: the same gradients (overwritten, not accumulated).
  model->backward();
  EXPECT_EQ(std::vector<float>(model->grads(), model->grads() + model->num_params()), analytic);

  std::vector<float> params(model->params(), model->params() + model->num_params());
  auto loss_at = [&]() {
    std::copy(params.begin(), params.end(), model->params());
    return loss();
  };
  const double worst =
      expect_gradient_matches("dparams", params, analytic, loss_at, Tolerance{1e-3, 2e-3, 1e-5});
  RecordProperty("worst_relative_error", std::to_string(worst));
  // The gradient is not trivially zero anywhere it matters.
  EXPECT_GT(*std::max_element(analytic.begin(), analytic.end()), 1e-3f);
}

TEST(Model, BackwardReportsRangesInReverseOrderThatTileTheBuffer) {
  auto model = small_mlp(0.5f);
  model->init_params(1);
  const int64_t batch = 5;
  const std::vector<float> x = random_vector(batch * 12, 22);
  const std::vector<int32_t> labels = {0, 1, 2, 3, 4};
  model->forward(x.data(), batch, StepInfo{true, 9, 0});
  model->loss(labels.data(), 1.0f / float(batch));
  std::vector<ParamRange> seen;
  std::vector<std::vector<float>> at_callback;
  model->backward([&](const ParamRange& r) {
    seen.push_back(r);
    at_callback.emplace_back(model->grads() + r.offset, model->grads() + r.offset + r.count);
  });
  ASSERT_EQ(seen.size(), model->param_ranges().size());
  ASSERT_EQ(seen.size(), 3u);
  // Reverse layer order, and together the ranges tile [0, num_params) without gaps.
  int64_t end = model->num_params();
  for (size_t i = 0; i < seen.size(); ++i) {
    if (i > 0) {
      EXPECT_LT(seen[i].layer, seen[i - 1].layer);
    }
    EXPECT_EQ(seen[i].offset + seen[i].count, end) << i;
    EXPECT_GT(seen[i].count, 0);
    end = seen[i].offset;
    // A range is final when reported: the rest of backward does not touch it.
    EXPECT_EQ(at_callback[i], std::vector<float>(model->grads() + seen[i].offset,
                                                 model->grads() + seen[i].offset + seen[i].count));
  }
  EXPECT_EQ(end, 0);
  EXPECT_EQ(seen.back().layer, 1);
  EXPECT_EQ(seen.front().layer, 7);
}

// Dropout streams are indexed by the global sample, so a batch of 8 in one call draws the same
// masks as the same 8 samples as two batches of 4 with sample_offset 0 and 4 (what data-parallel
// workers do). With only elementwise layers the outputs are then the same bits on every CPU
// (docs/determinism.md: masks are a pure function of key and index).
TEST(Model, DropoutMasksFollowTheSampleNotTheSplit) {
  const int64_t features = 12, batch = 8;
  const std::vector<float> x = random_vector(batch * features, 23);
  const uint64_t key = derive_key(2, 0, RngPurpose::kDropout, 17);
  auto elementwise = [](int64_t width) {
    std::vector<std::unique_ptr<Layer>> layers;
    layers.push_back(std::make_unique<Flatten>());
    layers.push_back(std::make_unique<Dropout>(0.5f));
    layers.push_back(std::make_unique<ReLU>());
    layers.push_back(std::make_unique<Dropout>(0.25f));
    return std::make_unique<Model>(cpu_backend(), Shape{3, 4}, width, std::move(layers));
  };
  auto whole = elementwise(features);
  auto split = elementwise(features);
  const float* y = whole->forward(x.data(), batch, StepInfo{true, key, 0});
  const std::vector<float> out(y, y + batch * features);
  const float* y0 = split->forward(x.data(), 4, StepInfo{true, key, 0});
  std::vector<float> halves(y0, y0 + 4 * features);
  const float* y1 = split->forward(x.data() + 4 * features, 4, StepInfo{true, key, 4});
  halves.insert(halves.end(), y1, y1 + 4 * features);
  EXPECT_EQ(halves, out);
  EXPECT_GT(std::count(out.begin(), out.end(), 0.0f), 0);  // some units were dropped

  // With another offset the second half draws other masks.
  const float* y2 = split->forward(x.data() + 4 * features, 4, StepInfo{true, key, 0});
  EXPECT_NE(std::vector<float>(y2, y2 + 4 * features),
            std::vector<float>(out.begin() + 4 * features, out.end()));
}

// The same through an MLP, whose GEMMs sit between the dropouts. oneDNN picks kernels and
// blockings by ISA and by the batch, so one batch of 8 and two of 4 may round differently (on
// AVX2 they do, in the last bits): the logits agree to float rounding, and a wrong mask would
// move them by far more than that.
TEST(Model, DropoutMasksFollowTheSampleThroughAnMlp) {
  const int64_t features = 12, batch = 8;
  const std::vector<float> x = random_vector(batch * features, 23);
  const uint64_t key = derive_key(2, 0, RngPurpose::kDropout, 17);
  auto whole = small_mlp(0.5f);
  auto split = small_mlp(0.5f);
  whole->init_params(5);
  split->init_params(5);
  const float* y = whole->forward(x.data(), batch, StepInfo{true, key, 0});
  const std::vector<float> logits(y, y + batch * 5);
  const float* y0 = split->forward(x.data(), 4, StepInfo{true, key, 0});
  std::vector<float> halves(y0, y0 + 4 * 5);
  const float* y1 = split->forward(x.data() + 4 * features, 4, StepInfo{true, key, 4});
  halves.insert(halves.end(), y1, y1 + 4 * 5);
  auto max_diff = [](const float* a, const float* b, int64_t n) {
    float worst = 0;
    for (int64_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
    return worst;
  };
  const float rounding = 1e-5f;
  EXPECT_LE(max_diff(halves.data(), logits.data(), batch * 5), rounding);

  // With another offset the second half draws other masks: far beyond rounding.
  const float* y2 = split->forward(x.data() + 4 * features, 4, StepInfo{true, key, 0});
  EXPECT_GT(max_diff(y2, logits.data() + 20, 20), 100 * rounding);
  // Evaluation mode draws no mask at all: the same call, the same bits, whatever the key.
  const float* e1 = whole->forward(x.data(), batch, StepInfo{false, key, 0});
  const std::vector<float> eval_a(e1, e1 + batch * 5);
  const float* e2 = whole->forward(x.data(), batch, StepInfo{false, key + 1, 3});
  EXPECT_EQ(std::vector<float>(e2, e2 + batch * 5), eval_a);
}

TEST(Model, BuffersGrowAndShrinkWithTheBatch) {
  auto model = small_cnn();
  model->init_params(11);
  const std::vector<float> x = random_vector(6 * 36, 24);
  const StepInfo eval{false, 0, 0};
  const float* a = model->forward(x.data(), 2, eval);
  const std::vector<float> small(a, a + 2 * 3);
  const float* b = model->forward(x.data(), 6, eval);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(b[i], small[size_t(i)], 1e-6f) << i;
  const float* c = model->forward(x.data(), 2, eval);
  EXPECT_EQ(std::vector<float>(c, c + 6), small);
  EXPECT_THROW(model->forward(x.data(), 0, eval), Error);
}

TEST(Model, LossSumsOverTheBatchAndCountsCorrect) {
  auto model = small_mlp(0.0f);
  model->init_params(2);
  const int64_t batch = 6;
  const std::vector<float> x = random_vector(batch * 12, 25);
  const float* logits = model->forward(x.data(), batch, StepInfo{false, 0, 0});
  std::vector<int32_t> labels(batch);
  for (int64_t r = 0; r < batch; ++r)  // label = argmax for even rows, another class for odd
    labels[size_t(r)] = int32_t(std::max_element(logits + r * 5, logits + r * 5 + 5) -
                                (logits + r * 5) + (r % 2) * 1) %
                        5;
  double want = 0;
  for (int64_t r = 0; r < batch; ++r) {
    double mx = -1e30, sum = 0;
    for (int c = 0; c < 5; ++c) mx = std::max(mx, double(logits[r * 5 + c]));
    for (int c = 0; c < 5; ++c) sum += std::exp(double(logits[r * 5 + c]) - mx);
    want += mx + std::log(sum) - logits[r * 5 + labels[size_t(r)]];
  }
  const LossResult res = model->loss(labels.data(), 1.0f);
  EXPECT_NEAR(res.loss_sum, want, 1e-5 * want);
  EXPECT_EQ(res.correct, 3);
}

// Wraps a layer and records how backward was called.
class Recording : public Layer {
 public:
  explicit Recording(std::unique_ptr<Layer> inner) : inner_(std::move(inner)) {}
  std::string kind() const override { return inner_->kind(); }
  Shape build(const Shape& input) override { return inner_->build(input); }
  int64_t num_params() const override { return inner_->num_params(); }
  void bind(float* params, float* grads) override { inner_->bind(params, grads); }
  void init_params(Rng& rng, Backend& backend) override { inner_->init_params(rng, backend); }
  void forward(const Context& ctx, const float* x, float* y, int64_t batch) override {
    inner_->forward(ctx, x, y, batch);
  }
  void backward(const Context& ctx, const float* x, const float* y, const float* dy, float* dx,
                int64_t batch) override {
    ++calls;
    dx_was_null = dx == nullptr;
    inner_->backward(ctx, x, y, dy, dx, batch);
  }
  int calls = 0;
  bool dx_was_null = false;

 private:
  std::unique_ptr<Layer> inner_;
};

TEST(Model, BackwardStopsBelowTheFirstLayerWithParameters) {
  // Flatten -> Linear -> ReLU -> Linear: the first Linear needs no input gradient (the MLP's
  // [batch, 784] x [784, 1024] product) and the Flatten under it is not run backward.
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Recording>(std::make_unique<Flatten>()));
  layers.push_back(std::make_unique<Recording>(std::make_unique<Linear>(12, 8)));
  layers.push_back(std::make_unique<ReLU>());
  layers.push_back(std::make_unique<Recording>(std::make_unique<Linear>(8, 5)));
  auto* flatten = static_cast<Recording*>(layers[0].get());
  auto* first = static_cast<Recording*>(layers[1].get());
  auto* last = static_cast<Recording*>(layers[3].get());
  Model m(cpu_backend(), Shape{3, 4}, 5, std::move(layers));
  m.init_params(7);
  const std::vector<float> x = random_vector(2 * 12, 8, -1.0f, 1.0f);
  const std::vector<int32_t> y = {1, 4};
  m.forward(x.data(), 2, StepInfo{});
  m.loss(y.data(), 0.5f);
  int ready = 0;
  m.backward([&](const ParamRange&) { ++ready; });
  EXPECT_EQ(flatten->calls, 0);
  EXPECT_EQ(first->calls, 1);
  EXPECT_TRUE(first->dx_was_null);
  EXPECT_EQ(last->calls, 1);
  EXPECT_FALSE(last->dx_was_null);
  EXPECT_EQ(ready, 2);  // both layers' gradients still reported
}

}  // namespace
}  // namespace loom::nn
