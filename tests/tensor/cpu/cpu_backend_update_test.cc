// CpuBackend::sgd_update and adam_update against values computed by hand for a few steps.
// Every expectation below is worked out in the comment above it from the formulas in
// backend.h, so a sign, a missing bias correction or a swapped term shows as a wrong number.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "loom/tensor/cpu/cpu_backend.h"

namespace loom {
namespace {

constexpr float kTol = 1e-6f;

struct SgdCase {
  float momentum, weight_decay;
  bool nesterov;
  float want[3];  // p after steps 1..3, from p = 1, g = 0.5, lr = 0.1
};

TEST(CpuBackendUpdate, SgdThreeStepsByHand) {
  const SgdCase cases[] = {
      // plain: p -= 0.05 each step
      {0.0f, 0.0f, false, {0.95f, 0.9f, 0.85f}},
      // momentum 0.9: v = 0.5, 0.95, 1.355; p = 1 - 0.05, - 0.095, - 0.1355
      {0.9f, 0.0f, false, {0.95f, 0.855f, 0.7195f}},
      // nesterov: v as above; p -= 0.1 (0.5 + 0.9 v) = 0.095, 0.1355, 0.17195
      {0.9f, 0.0f, true, {0.905f, 0.7695f, 0.59755f}},
      // weight decay 0.1, no momentum: d = 0.5 + 0.1 p; p -= 0.1 d:
      // 1 - 0.06 = 0.94; 0.94 - 0.0594 = 0.8806; 0.8806 - 0.058806 = 0.821794
      {0.0f, 0.1f, false, {0.94f, 0.8806f, 0.821794f}},
      // momentum 0.9 + weight decay 0.1: d = 0.6, v = 0.6, p = 0.94;
      // d = 0.594, v = 0.54 + 0.594 = 1.134, p = 0.8266;
      // d = 0.58266, v = 1.0206 + 0.58266 = 1.60326, p = 0.666274
      {0.9f, 0.1f, false, {0.94f, 0.8266f, 0.666274f}},
      // nesterov + weight decay: d = 0.6, v = 0.6, p -= 0.1 (0.6 + 0.54) -> 0.886;
      // d = 0.5886, v = 0.54 + 0.5886 = 1.1286, p -= 0.1 (0.5886 + 1.01574) -> 0.725566;
      // d = 0.5725566, v = 1.01574 + 0.5725566 = 1.5882966,
      // p -= 0.1 (0.5725566 + 1.42946694) -> 0.525363
      {0.9f, 0.1f, true, {0.886f, 0.725566f, 0.52536365f}},
  };
  CpuBackend be;
  for (const SgdCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "momentum=" << c.momentum << " wd=" << c.weight_decay
                                      << " nesterov=" << c.nesterov);
    float p = 1.0f, v = 0.0f;
    const float g = 0.5f;
    for (int step = 0; step < 3; ++step) {
      be.sgd_update(&p, &g, c.momentum == 0.0f ? nullptr : &v, 1, 0.1f, c.momentum, c.weight_decay,
                    c.nesterov);
      EXPECT_NEAR(p, c.want[step], kTol) << "step " << step + 1;
    }
  }
}

// Many elements with different values, against the formula in double: catches an element
// update that uses a neighbour's value, or a vector tail handled differently.
TEST(CpuBackendUpdate, SgdElementwiseAgainstDoubleFormula) {
  CpuBackend be;
  const int64_t n = 37;
  for (bool nesterov : {false, true}) {
    std::vector<float> p(n), g(n), v(n, 0.0f);
    std::vector<double> pd(n), vd(n, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      p[size_t(i)] = float(pd[size_t(i)] = 0.1 * double(i) - 1.5);
      g[size_t(i)] = 0.05f * float(i % 7) - 0.15f;
    }
    const double lr = 0.2, mu = 0.8, wd = 0.01;
    for (int step = 0; step < 4; ++step) {
      be.sgd_update(p.data(), g.data(), v.data(), n, float(lr), float(mu), float(wd), nesterov);
      for (int64_t i = 0; i < n; ++i) {
        const double d = double(g[size_t(i)]) + wd * pd[size_t(i)];
        vd[size_t(i)] = mu * vd[size_t(i)] + d;
        pd[size_t(i)] -= lr * (nesterov ? d + mu * vd[size_t(i)] : vd[size_t(i)]);
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(p[size_t(i)], pd[size_t(i)], 1e-5) << "nesterov=" << nesterov << " i=" << i;
      EXPECT_NEAR(v[size_t(i)], vd[size_t(i)], 1e-5) << "nesterov=" << nesterov << " i=" << i;
    }
  }
}

struct AdamCase {
  float weight_decay;
  bool decoupled;
  float grads[3];
  float want_p[3], want_m[3], want_v[3];
};

TEST(CpuBackendUpdate, AdamThreeStepsByHand) {
  // lr 0.1, beta1 0.9, beta2 0.999, eps 1e-8, p0 = 1.
  const AdamCase cases[] = {
      // Constant g: with bias correction m_hat = g and v_hat = g^2 at every step, so each step
      // moves p by lr exactly (without it, step 1 would move 0.1 * 0.05 / sqrt(2.5e-4) = 0.316).
      {0.0f,
       false,
       {0.5f, 0.5f, 0.5f},
       {0.9f, 0.8f, 0.7f},
       {0.05f, 0.095f, 0.1355f},
       {0.00025f, 0.00049975f, 0.00074925025f}},
      // g = 0.5, -0.25, 1: step 2 has m = 0.045 - 0.025 = 0.02, v = 2.4975e-4 + 6.25e-5 =
      // 3.1225e-4, m_hat = 0.02 / 0.19 = 0.1052632, v_hat = 3.1225e-4 / 0.001999 = 0.1562031,
      // p = 0.9 - 0.1 * 0.1052632 / 0.3952254 = 0.8733663; step 3 likewise.
      {0.0f,
       false,
       {0.5f, -0.25f, 1.0f},
       {0.9f, 0.8733663f, 0.80755514f},
       {0.05f, 0.02f, 0.118f},
       {0.00025f, 0.00031225f, 0.00131193775f}},
      // L2 weight decay 0.1 enters the gradient: g1 = 0.6 (step of lr again), g2 = 0.5 + 0.09 =
      // 0.59, m = 0.054 + 0.059 = 0.113, v = 3.5964e-4 + 3.481e-4 = 7.0774e-4, ...
      {0.1f,
       false,
       {0.5f, 0.5f, 0.5f},
       {0.9f, 0.80004734f, 0.70017458f},
       {0.06f, 0.113f, 0.159700473f},
       {0.00036f, 0.00070774f, 0.00104343775f}},
      // AdamW: p = p (1 - lr wd) - lr m_hat / (sqrt(v_hat) + eps) = 0.99 p - 0.1:
      // 0.89, 0.7811, 0.673289; the moments see only g.
      {0.1f,
       true,
       {0.5f, 0.5f, 0.5f},
       {0.89f, 0.7811f, 0.673289f},
       {0.05f, 0.095f, 0.1355f},
       {0.00025f, 0.00049975f, 0.00074925025f}},
  };
  CpuBackend be;
  for (const AdamCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "wd=" << c.weight_decay << " decoupled=" << c.decoupled
                                      << " g2=" << c.grads[1]);
    float p = 1.0f, m = 0.0f, v = 0.0f;
    for (int t = 1; t <= 3; ++t) {
      be.adam_update(&p, &c.grads[t - 1], &m, &v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, c.weight_decay,
                     c.decoupled, t);
      EXPECT_NEAR(p, c.want_p[t - 1], 2e-6) << "step " << t;
      EXPECT_NEAR(m, c.want_m[t - 1], 1e-7) << "step " << t;
      // 1 - 0.999f is 9.9998713e-4 in float: v carries that 1.3e-5 relative offset.
      EXPECT_NEAR(v, c.want_v[t - 1], 3e-5 * c.want_v[t - 1]) << "step " << t;
    }
  }
}

TEST(CpuBackendUpdate, AdamElementwiseAgainstDoubleFormula) {
  CpuBackend be;
  const int64_t n = 29;
  for (bool decoupled : {false, true}) {
    std::vector<float> p(n), g(n), m(n, 0.0f), v(n, 0.0f);
    std::vector<double> pd(n), md(n, 0.0), vd(n, 0.0);
    for (int64_t i = 0; i < n; ++i) p[size_t(i)] = float(pd[size_t(i)] = 0.07 * double(i) - 1.0);
    const double lr = 0.01, b1 = 0.8, b2 = 0.99, eps = 1e-6, wd = 0.05;
    for (int64_t t = 1; t <= 5; ++t) {
      for (int64_t i = 0; i < n; ++i) g[size_t(i)] = 0.1f * float((i * 3 + t) % 11) - 0.5f;
      be.adam_update(p.data(), g.data(), m.data(), v.data(), n, float(lr), float(b1), float(b2),
                     float(eps), float(wd), decoupled, t);
      for (int64_t i = 0; i < n; ++i) {
        double gi = g[size_t(i)] + (decoupled ? 0.0 : wd * pd[size_t(i)]);
        md[size_t(i)] = b1 * md[size_t(i)] + (1 - b1) * gi;
        vd[size_t(i)] = b2 * vd[size_t(i)] + (1 - b2) * gi * gi;
        const double mh = md[size_t(i)] / (1 - std::pow(b1, double(t)));
        const double vh = vd[size_t(i)] / (1 - std::pow(b2, double(t)));
        if (decoupled) pd[size_t(i)] *= 1 - lr * wd;
        pd[size_t(i)] -= lr * mh / (std::sqrt(vh) + eps);
      }
    }
    for (int64_t i = 0; i < n; ++i)
      EXPECT_NEAR(p[size_t(i)], pd[size_t(i)], 1e-5) << "decoupled=" << decoupled << " i=" << i;
  }
}

}  // namespace
}  // namespace loom
