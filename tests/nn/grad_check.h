// Finite-difference gradient checks for nn layers and models.
//
// The scalar checked is L = sum_i r_i y_i (accumulated in double) for a fixed random r, so
// dL/dy = r is what backward receives. Each input or parameter v is moved to float(v + h) and
// float(v - h) and the central difference is divided by the step actually taken (the two
// float values' difference in double), so the rounding of v +- h adds no error. Layers that
// are linear in each input and parameter separately (Linear, Conv2d, Dropout, Flatten, and
// ReLU/MaxPool2d away from kinks and ties) have no truncation error, so what remains is the
// float forward's rounding divided by 2h.
//
// An entry passes when |analytic - numeric| <= rtol * max(|analytic|, |numeric|) + atol.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "loom/core/error.h"
#include "loom/core/rng.h"
#include "loom/nn/layers/layer.h"
#include "loom/tensor/backend_registry.h"
#include "tensor/random_vector.h"

namespace loom::nn::testing {

struct Tolerance {
  double h = 1e-2;
  double rtol = 1e-3;
  double atol = 1e-5;
};

// For layers that are bilinear in input and weight (Linear, Conv2d).
inline constexpr Tolerance kBilinear{0.05, 1e-3, 1e-5};

// n distinct values (0.1 apart, shuffled by `seed`): no ties for max pooling and no kinks hit
// by the finite differences.
inline std::vector<float> distinct_values(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0f);
  Rng rng(seed, 0, RngPurpose::kTest);
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(v[size_t(i)], v[size_t(rng.below(uint64_t(i + 1)))]);
  for (float& x : v) x = 0.1f * x - 2.0f;
  return v;
}

// `f` throws a ConfigError whose message contains `needle`.
inline void expect_config_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no ConfigError (wanted one mentioning " << needle << ")";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

using loom::testing::random_vector;

// Central difference of f with respect to v.
inline double central_difference(float& v, double h, const std::function<double()>& f) {
  const float saved = v;
  v = float(double(saved) + h);
  const float up = v;
  const double f_up = f();
  v = float(double(saved) - h);
  const float down = v;
  const double f_down = f();
  v = saved;
  return (f_up - f_down) / (double(up) - double(down));
}

// Compares analytic[i] with the central difference of f in values[i], for every i. Returns
// the largest relative error seen (for the test's log).
inline double expect_gradient_matches(const char* what, std::vector<float>& values,
                                      const std::vector<float>& analytic,
                                      const std::function<double()>& f, const Tolerance& tol) {
  EXPECT_EQ(values.size(), analytic.size()) << what;
  double worst = 0;
  int failures = 0;
  for (size_t i = 0; i < values.size() && i < analytic.size(); ++i) {
    const double numeric = central_difference(values[i], tol.h, f);
    const double a = analytic[i];
    const double err = std::fabs(a - numeric);
    const double scale = std::max(std::fabs(a), std::fabs(numeric));
    worst = std::max(worst, err / std::max(scale, 1e-12));
    if (!(err <= tol.rtol * scale + tol.atol) && failures++ < 8)
      ADD_FAILURE() << what << "[" << i << "]: analytic " << a << ", numeric " << numeric
                    << " (error " << err << ")";
  }
  return worst;
}

inline double project(const std::vector<float>& y, const std::vector<float>& r) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += double(y[i]) * double(r[i]);
  return s;
}

// Builds `layer` for `in_shape`, binds fresh parameter/gradient buffers, initialises them from
// a fixed seed, runs forward and backward on x, and checks the input gradient and every
// parameter gradient by central differences. Gradient buffers are pre-filled with garbage:
// backward must overwrite them.
inline void check_layer_gradients(Layer& layer, const Shape& in_shape, int64_t batch,
                                  std::vector<float> x, const Context& ctx, const Tolerance& tol,
                                  uint64_t seed = 1) {
  Backend& be = *ctx.backend;
  const Shape out_shape = layer.build(in_shape);
  const int64_t n_in = numel(in_shape) * batch, n_out = numel(out_shape) * batch;
  ASSERT_EQ(int64_t(x.size()), n_in);
  const int64_t np = layer.num_params();
  std::vector<float> params(static_cast<size_t>(np)), grads(static_cast<size_t>(np), 1234.5f);
  if (np > 0) {
    layer.bind(params.data(), grads.data());
    Rng rng(seed, 0, RngPurpose::kInit);
    layer.init_params(rng, be);
  }
  // Non-trained state (BatchNorm's running statistics), at its initial values.
  std::vector<float> state(static_cast<size_t>(layer.num_state()));
  if (!state.empty()) {
    layer.bind_state(state.data());
    layer.init_state(be);
  }
  const std::vector<float> r = random_vector(n_out, seed + 1000);
  std::vector<float> y(static_cast<size_t>(n_out));
  auto loss = [&]() {
    layer.forward(ctx, x.data(), y.data(), batch);
    return project(y, r);
  };
  loss();
  std::vector<float> dx(static_cast<size_t>(n_in), -777.0f);
  layer.backward(ctx, x.data(), y.data(), r.data(), dx.data(), batch);
  const std::vector<float> analytic_params = grads;

  // Without dx (a model's first layer), parameter gradients are the same.
  std::fill(grads.begin(), grads.end(), -55.0f);
  layer.backward(ctx, x.data(), y.data(), r.data(), nullptr, batch);
  EXPECT_EQ(grads, analytic_params) << layer.describe() << ": parameter gradients depend on dx";

  const double worst_x = expect_gradient_matches("dx", x, dx, loss, tol);
  double worst_p = 0;
  if (np > 0) worst_p = expect_gradient_matches("dparams", params, analytic_params, loss, tol);
  ::testing::Test::RecordProperty("worst_relative_error_dx", std::to_string(worst_x));
  ::testing::Test::RecordProperty("worst_relative_error_dparams", std::to_string(worst_p));
}

// A layer of two inputs (Mul, MatMul) through the multi-input calls: both input gradients by
// central differences.
inline void check_two_input_gradients(Layer& layer, const Shape& a_shape, const Shape& b_shape,
                                      int64_t batch, const Context& ctx, const Tolerance& tol) {
  const Shape out = layer.build_inputs({a_shape, b_shape});
  auto a = random_vector(numel(a_shape) * batch, 11);
  auto b = random_vector(numel(b_shape) * batch, 12);
  const auto r = random_vector(numel(out) * batch, 13);
  std::vector<float> y(r.size());
  auto loss = [&] {
    layer.forward_inputs(ctx, {a.data(), b.data()}, y.data(), batch);
    return project(y, r);
  };
  loss();
  std::vector<float> da(a.size(), -9.0f), db(b.size(), -9.0f);
  layer.backward_inputs(ctx, {a.data(), b.data()}, y.data(), r.data(), {da.data(), db.data()},
                        batch);
  expect_gradient_matches("d input 0", a, da, loss, tol);
  expect_gradient_matches("d input 1", b, db, loss, tol);
}

inline Context make_context(bool training = false, uint64_t dropout_key = 0,
                            int64_t sample_offset = 0, int layer_index = 0) {
  Context ctx;
  ctx.backend = &cpu_backend();
  ctx.training = training;
  ctx.dropout_key = dropout_key;
  ctx.sample_offset = sample_offset;
  ctx.layer_index = layer_index;
  return ctx;
}

}  // namespace loom::nn::testing
