// Sgd and Adam on flat spans against values computed by hand (the arithmetic is in the
// comments), sub-range updates, state reset, and make_optimizer's config errors.
#include "loom/optim/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "loom/core/error.h"
#include "loom/plan/optim_reader.h"
#include "loom/tensor/backend_registry.h"

namespace loom::optim {
namespace {

Backend& be() {
  return cpu_backend();
}

std::vector<float> state_of(Optimizer& opt, size_t which) {
  auto s = opt.state();
  EXPECT_LT(which, s.size());
  if (which >= s.size()) return {};
  return std::vector<float>(s[which].data, s[which].data + s[which].size);
}

// Two elements, three steps of lr 0.1: element 0 has p = 1, g = 0.5 and element 1 has
// p = -2, g = -1, so a swapped index or a sign error shows.
struct SgdCase {
  float momentum, wd;
  bool nesterov;
  float want0[3], want1[3];
};

TEST(Sgd, ThreeStepsByHand) {
  const SgdCase cases[] = {
      // plain: p -= 0.1 g
      {0.0f, 0.0f, false, {0.95f, 0.9f, 0.85f}, {-1.9f, -1.8f, -1.7f}},
      // momentum 0.9: v0 = 0.5, 0.95, 1.355; v1 = -1, -1.9, -2.71
      {0.9f, 0.0f, false, {0.95f, 0.855f, 0.7195f}, {-1.9f, -1.71f, -1.439f}},
      // nesterov: p -= 0.1 (g + 0.9 v): element 1 moves 0.19, 0.271, 0.3439
      {0.9f, 0.0f, true, {0.905f, 0.7695f, 0.59755f}, {-1.81f, -1.539f, -1.1951f}},
      // weight decay 0.1 (no momentum): d1 = -1 - 0.2 = -1.2, p1 = -1.88;
      // d1 = -1.188, p1 = -1.7612; d1 = -1.17612, p1 = -1.643588
      {0.0f, 0.1f, false, {0.94f, 0.8806f, 0.821794f}, {-1.88f, -1.7612f, -1.643588f}},
      // momentum 0.9 + weight decay 0.1: element 0 as in the tensor tests
      // element 1: d = -1.2, v = -1.2, p = -1.88; d = -1.188, v = -2.268, p = -1.6532;
      // d = -1.16532, v = -3.20652, p = -1.332548
      {0.9f, 0.1f, false, {0.94f, 0.8266f, 0.666274f}, {-1.88f, -1.6532f, -1.332548f}},
  };
  for (const SgdCase& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "momentum=" << c.momentum << " wd=" << c.wd << " nesterov=" << c.nesterov);
    Sgd opt(be(), 2, c.momentum, c.wd, c.nesterov);
    std::vector<float> p = {1.0f, -2.0f};
    const std::vector<float> g = {0.5f, -1.0f};
    for (int s = 0; s < 3; ++s) {
      opt.step(p.data(), g.data(), 2, 0.1f);
      EXPECT_NEAR(p[0], c.want0[s], 1e-6) << "step " << s + 1;
      EXPECT_NEAR(p[1], c.want1[s], 1e-6) << "step " << s + 1;
    }
    EXPECT_EQ(opt.steps(), 3);
    EXPECT_EQ(opt.state().size(), c.momentum == 0.0f ? 0u : 1u);  // no buffer without momentum
  }
}

TEST(Adam, ThreeStepsByHand) {
  // lr 0.1, betas (0.9, 0.999), eps 1e-8. Element 0: g = 0.5 each step: with bias correction
  // m_hat = g and v_hat = g^2, so p moves by lr every step (0.9, 0.8, 0.7).
  // Element 1: p = -2, g = -1, the same in mirror image (-1.9, -1.8, -1.7).
  {
    Adam opt(be(), 2, 0.9f, 0.999f, 1e-8f, 0.0f, false);
    std::vector<float> p = {1.0f, -2.0f};
    const std::vector<float> g = {0.5f, -1.0f};
    const float want0[] = {0.9f, 0.8f, 0.7f}, want1[] = {-1.9f, -1.8f, -1.7f};
    for (int s = 0; s < 3; ++s) {
      opt.step(p.data(), g.data(), 2, 0.1f);
      EXPECT_NEAR(p[0], want0[s], 2e-6) << s;
      EXPECT_NEAR(p[1], want1[s], 2e-6) << s;
    }
    // m after 3 steps: g (1 - 0.9^3) = 0.271 g.
    const std::vector<float> m = state_of(opt, 0);
    EXPECT_NEAR(m[0], 0.1355f, 1e-7);
    EXPECT_NEAR(m[1], -0.271f, 1e-7);
  }
  // AdamW, weight decay 0.1: p = 0.99 p - 0.1 sign(g) each step.
  // Element 0: 0.89, 0.7811, 0.673289. Element 1: -1.88, -1.7612, -1.643588.
  {
    Adam opt(be(), 2, 0.9f, 0.999f, 1e-8f, 0.1f, true);
    std::vector<float> p = {1.0f, -2.0f};
    const std::vector<float> g = {0.5f, -1.0f};
    const float want0[] = {0.89f, 0.7811f, 0.673289f}, want1[] = {-1.88f, -1.7612f, -1.643588f};
    for (int s = 0; s < 3; ++s) {
      opt.step(p.data(), g.data(), 2, 0.1f);
      EXPECT_NEAR(p[0], want0[s], 2e-6) << s;
      EXPECT_NEAR(p[1], want1[s], 2e-6) << s;
    }
  }
  // Adam with L2 weight decay 0.1 (coupled): element 0 sees g = 0.5 + 0.1 p:
  // 0.6 -> p = 0.9; g = 0.59, m = 0.113, v = 7.0774e-4 -> p = 0.80004734; then 0.70017458.
  {
    Adam opt(be(), 1, 0.9f, 0.999f, 1e-8f, 0.1f, false);
    float p = 1.0f;
    const float g = 0.5f;
    const float want[] = {0.9f, 0.80004734f, 0.70017458f};
    for (int s = 0; s < 3; ++s) {
      opt.step(&p, &g, 1, 0.1f);
      EXPECT_NEAR(p, want[s], 2e-6) << s;
    }
  }
}

TEST(Adam, UpdateBeforeAdvanceIsAnError) {
  Adam opt(be(), 3, 0.9f, 0.999f, 1e-8f, 0.0f, false);
  std::vector<float> p(3), g(3, 1.0f);
  EXPECT_THROW(opt.update(p.data(), g.data(), 0, 3, 0.1f), Error);
}

// A sub-range update touches params, and state, in that range only; updating a model in
// two pieces (buckets, parameter-server shards) equals updating it whole, bit for bit.
template <typename MakeOpt>
void check_sub_ranges(MakeOpt make, const char* name) {
  SCOPED_TRACE(name);
  const int64_t n = 10;
  std::vector<float> p0(n), g(n);
  for (int64_t i = 0; i < n; ++i) {
    p0[size_t(i)] = 0.3f * float(i) - 1.0f;
    g[size_t(i)] = 0.1f * float(i % 4) - 0.15f;
  }
  auto part = make(n);
  std::vector<float> p = p0;
  part->advance();
  part->update(p.data() + 3, g.data() + 3, 3, 4, 0.1f);
  for (int64_t i = 0; i < n; ++i) {
    const bool inside = i >= 3 && i < 7;
    EXPECT_EQ(p[size_t(i)] != p0[size_t(i)], inside) << i;
  }
  for (const StateBuffer& s : part->state()) {
    ASSERT_EQ(s.size, n) << s.name;
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(s.data[i] != 0.0f, i >= 3 && i < 7) << s.name << "[" << i << "]";
  }

  auto whole = make(n), pieces = make(n);
  std::vector<float> pw = p0, pp = p0;
  for (int step = 0; step < 3; ++step) {
    whole->step(pw.data(), g.data(), n, 0.05f);
    pieces->advance();
    pieces->update(pp.data() + 6, g.data() + 6, 6, 4, 0.05f);  // any order
    pieces->update(pp.data(), g.data(), 0, 6, 0.05f);
  }
  EXPECT_EQ(pp, pw);
  for (size_t s = 0; s < whole->state().size(); ++s)
    EXPECT_EQ(state_of(*pieces, s), state_of(*whole, s));
}

TEST(Optimizer, SubRangeUpdateTouchesOnlyThatRange) {
  check_sub_ranges([](int64_t n) { return std::make_unique<Sgd>(be(), n, 0.9f, 0.01f, false); },
                   "sgd momentum");
  check_sub_ranges([](int64_t n) { return std::make_unique<Sgd>(be(), n, 0.9f, 0.0f, true); },
                   "sgd nesterov");
  check_sub_ranges([](int64_t n) { return std::make_unique<Sgd>(be(), n, 0.0f, 0.0f, false); },
                   "sgd plain");
  check_sub_ranges(
      [](int64_t n) { return std::make_unique<Adam>(be(), n, 0.9f, 0.999f, 1e-8f, 0.0f, false); },
      "adam");
  check_sub_ranges(
      [](int64_t n) { return std::make_unique<Adam>(be(), n, 0.9f, 0.999f, 1e-8f, 0.1f, true); },
      "adamw");
}

TEST(Optimizer, ResetStateZeroesMomentumAndMoments) {
  const std::vector<float> g = {0.5f, -1.0f};
  {
    Sgd opt(be(), 2, 0.9f, 0.0f, false);
    std::vector<float> p = {1.0f, -2.0f};
    opt.step(p.data(), g.data(), 2, 0.1f);
    opt.step(p.data(), g.data(), 2, 0.1f);
    EXPECT_NE(state_of(opt, 0), (std::vector<float>{0, 0}));
    opt.reset_state();
    EXPECT_EQ(state_of(opt, 0), (std::vector<float>{0, 0}));
    // After a reset the next step is a first step again: v = g, p -= lr g.
    std::vector<float> q = {1.0f, -2.0f};
    opt.step(q.data(), g.data(), 2, 0.1f);
    EXPECT_FLOAT_EQ(q[0], 0.95f);
    EXPECT_FLOAT_EQ(q[1], -1.9f);
    EXPECT_EQ(state_of(opt, 0), g);
  }
  {
    Adam opt(be(), 2, 0.9f, 0.999f, 1e-8f, 0.0f, false);
    std::vector<float> p = {1.0f, -2.0f};
    opt.step(p.data(), g.data(), 2, 0.1f);
    ASSERT_EQ(opt.state().size(), 2u);
    EXPECT_EQ(opt.state()[0].name, "adam_m");
    EXPECT_EQ(opt.state()[1].name, "adam_v");
    opt.reset_state();
    EXPECT_EQ(state_of(opt, 0), (std::vector<float>{0, 0}));
    EXPECT_EQ(state_of(opt, 1), (std::vector<float>{0, 0}));
  }
  {
    Sgd plain(be(), 2, 0.0f, 0.0f, false);
    EXPECT_NO_THROW(plain.reset_state());  // no state to reset
  }
}

TEST(Optimizer, StepCounting) {
  Adam opt(be(), 1, 0.9f, 0.999f, 1e-8f, 0.0f, false);
  EXPECT_EQ(opt.steps(), 0);
  opt.advance();
  opt.advance();
  EXPECT_EQ(opt.steps(), 2);
  // A resumed run restores the count, so bias correction continues where it was: at t = 1000
  // the correction is ~1 and the first update is m / sqrt(v) = 0.1 g / sqrt(0.001 g^2).
  opt.set_steps(999);
  float p = 0.0f;
  const float g = 1.0f;
  opt.step(&p, &g, 1, 1.0f);
  const double c1 = 1 - std::pow(0.9, 1000), c2 = 1 - std::pow(0.999, 1000);
  EXPECT_NEAR(p, -(0.1 / c1) / std::sqrt(0.001 / c2), 1e-4);
}

TEST(MakeOptimizer, DefaultsAndChoices) {
  auto sgd = make_optimizer(plan::read_optimizer_options(Config{}), be(), 4);
  EXPECT_NE(dynamic_cast<Sgd*>(sgd.get()), nullptr);
  EXPECT_EQ(sgd->describe(), "SGD(momentum=0.9, nesterov=false, weight_decay=0)");
  Config cfg = Config::from_string(
      "[optim]\nname = \"adam\"\nbeta1 = 0.8\ndecoupled = true\nweight_decay = 0.01\n");
  auto adam = make_optimizer(plan::read_optimizer_options(cfg), be(), 4);
  EXPECT_NE(dynamic_cast<Adam*>(adam.get()), nullptr);
  EXPECT_EQ(adam->describe(), "AdamW(beta1=0.8, beta2=0.999, eps=1e-08, weight_decay=0.01)");
  EXPECT_EQ(adam->state()[0].size, 4);
}

void expect_optimizer_refuses(const std::string& toml, const std::string& key) {
  SCOPED_TRACE(toml);
  Config cfg = Config::from_string(toml, "opt.toml");
  try {
    make_optimizer(plan::read_optimizer_options(cfg), be(), 4);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("'" + key + "'"), std::string::npos) << w;
    EXPECT_NE(w.find("opt.toml:"), std::string::npos) << w;
  }
}

TEST(MakeOptimizer, BadConfigNamesTheKey) {
  expect_optimizer_refuses("[optim]\nname = \"rmsprop\"\n", "optim.name");
  expect_optimizer_refuses("[optim]\nmomentum = 1.5\n", "optim.momentum");
  expect_optimizer_refuses("[optim]\nmomentum = -0.1\n", "optim.momentum");
  expect_optimizer_refuses("[optim]\nnesterov = \"yes\"\n", "optim.nesterov");
  expect_optimizer_refuses("[optim]\nweight_decay = -1\n", "optim.weight_decay");
  expect_optimizer_refuses("[optim]\nname = \"adam\"\nbeta1 = 1.0\n", "optim.beta1");
  expect_optimizer_refuses("[optim]\nname = \"adam\"\nbeta2 = 1.0\n", "optim.beta2");
  expect_optimizer_refuses("[optim]\nname = \"adam\"\neps = 0\n", "optim.eps");
  expect_optimizer_refuses("[optim]\nname = \"adam\"\ndecoupled = 1\n", "optim.decoupled");
}

}  // namespace
}  // namespace loom::optim
