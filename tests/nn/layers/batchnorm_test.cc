// BatchNorm (1d over [C] and [C, L], 2d over [C, H, W]) against PyTorch's values in training
// and evaluation (tests/data/nn), by finite differences, and its configuration errors.
#include "loom/nn/layers/batchnorm.h"

#include <gtest/gtest.h>

#include "loom/core/error.h"
#include "nn/grad_check.h"
#include "nn/reference_data.h"

namespace loom::nn {
namespace {

using testing::expect_matches;

class BatchNormReference : public ::testing::TestWithParam<const char*> {};

TEST_P(BatchNormReference, MatchesPyTorch) {
  const auto ref = testing::load_reference(GetParam());
  const bool training = ref.iattr("training") != 0;
  BatchNorm layer(ref.iattr("channels"), float(ref.attr("eps")), float(ref.attr("momentum")));
  const auto run =
      testing::run_layer(layer, ref, testing::join(ref, {"gamma", "beta"}),
                         testing::join(ref, {"running_mean_in", "running_var_in"}), training);
  const size_t c = size_t(ref.iattr("channels"));
  EXPECT_EQ(layer.kind(), ref.tensor("x").shape.size() == 4 ? "BatchNorm2d" : "BatchNorm1d");
  expect_matches("y", run.y, ref.tensor("y"));
  expect_matches("dx", run.dx, ref.tensor("dx"));
  expect_matches("dgamma", {run.dparams.begin(), run.dparams.begin() + c}, ref.tensor("dgamma"));
  expect_matches("dbeta", {run.dparams.begin() + c, run.dparams.end()}, ref.tensor("dbeta"));
  // Training updates the running statistics by the momentum rule (unbiased variance);
  // evaluation leaves them as they were.
  expect_matches("running_mean", {run.state.begin(), run.state.begin() + c},
                 ref.tensor("running_mean"));
  expect_matches("running_var", {run.state.begin() + c, run.state.end()},
                 ref.tensor("running_var"));
}

INSTANTIATE_TEST_SUITE_P(PyTorch, BatchNormReference,
                         ::testing::Values("batchnorm1d_train", "batchnorm1d_len_train",
                                           "batchnorm2d_train", "batchnorm2d_eval"));

// In training, y depends on x through the batch mean and variance as well: not linear, so the
// central difference has truncation error h^2 |d3L/dx3| / 6, which for unit-scale inputs over
// >= 8 values per channel is below 1e-5 at h = 1e-2. Each step moves every output of the
// channel, and each is rounded to float (<= 1.2e-7 at |y| <= 2): over ~24 outputs, at most
// ~3e-6 in L, ~1.5e-4 after dividing by 2h, so atol = 3e-4; rtol = 2e-3 covers the truncation
// relative to gradients of order 1. A missing term (the mean's or the variance's) is off by
// O(1 / count) ~ 4e-2 and more.
constexpr testing::Tolerance kTraining{1e-2, 2e-3, 3e-4};

TEST(BatchNorm, GradientsInTraining2d) {
  BatchNorm layer(3);
  testing::check_layer_gradients(layer, {3, 2, 3}, 4, testing::random_vector(4 * 18, 61),
                                 testing::make_context(true), kTraining);
}

TEST(BatchNorm, GradientsInTraining1d) {
  BatchNorm flat(4);
  testing::check_layer_gradients(flat, {4}, 8, testing::random_vector(8 * 4, 62),
                                 testing::make_context(true), kTraining);
  BatchNorm seq(2);
  testing::check_layer_gradients(seq, {2, 5}, 3, testing::random_vector(3 * 10, 63),
                                 testing::make_context(true), kTraining);
}

// In evaluation the statistics are fixed: linear in x, gamma and beta, so the default step is
// exact up to the forward's rounding.
TEST(BatchNorm, GradientsInEvaluation) {
  BatchNorm layer(3);
  testing::check_layer_gradients(layer, {3, 2, 2}, 2, testing::random_vector(24, 64),
                                 testing::make_context(false), testing::Tolerance{});
}

// A batch of one value per channel has no variance; PyTorch refuses it too.
TEST(BatchNorm, TrainingOnOneValuePerChannelIsAnError) {
  BatchNorm layer(2);
  layer.build({2});
  std::vector<float> params(4), grads(4), state(4), x{1.0f, 2.0f}, y(2);
  layer.bind(params.data(), grads.data());
  layer.bind_state(state.data());
  EXPECT_THROW(layer.forward(testing::make_context(true), x.data(), y.data(), 1), InputError);
}

TEST(BatchNorm, ParamsAndStateLayout) {
  BatchNorm layer(3);
  EXPECT_EQ(layer.build({3, 4, 4}), (Shape{3, 4, 4}));
  EXPECT_EQ(layer.num_params(), 6);
  EXPECT_EQ(layer.num_state(), 6);
  std::vector<float> params(6, -1.0f), grads(6), state(6, -1.0f);
  layer.bind(params.data(), grads.data());
  layer.bind_state(state.data());
  Rng rng(1, 0, RngPurpose::kInit);
  layer.init_params(rng, cpu_backend());
  layer.init_state(cpu_backend());
  EXPECT_EQ(params, (std::vector<float>{1, 1, 1, 0, 0, 0}));  // gamma, beta
  EXPECT_EQ(state, (std::vector<float>{0, 0, 0, 1, 1, 1}));   // running mean, running var
}

TEST(BatchNorm, BadShapesNameTheLayer) {
  BatchNorm layer(4);
  for (const Shape& bad : {Shape{3}, Shape{3, 5}, Shape{4, 2, 2, 2}, Shape{}}) {
    try {
      layer.build(bad);
      ADD_FAILURE() << "no ConfigError for " << shape_text(bad);
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("BatchNorm"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(BatchNorm(0), ConfigError);
  EXPECT_THROW(BatchNorm(4, 0.0f), ConfigError);
  EXPECT_THROW(BatchNorm(4, 1e-5f, 1.5f), ConfigError);
}

}  // namespace
}  // namespace loom::nn
