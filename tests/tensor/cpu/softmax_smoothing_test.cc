// Label-smoothed softmax cross-entropy against PyTorch's values (tests/data/nn, written by
// tests/nn/make_layer_references.py), and smoothing 0 as the plain one-hot loss.
#include <gtest/gtest.h>

#include <cmath>

#include "loom/core/error.h"
#include "loom/tensor/cpu/cpu_backend.h"
#include "nn/reference_data.h"

namespace loom {
namespace {

class SmoothedXent : public ::testing::TestWithParam<const char*> {};

TEST_P(SmoothedXent, MatchesPyTorch) {
  const auto ref = nn::testing::load_reference(GetParam());
  const auto& logits = ref.tensor("logits");
  ASSERT_EQ(logits.shape.size(), 2u);
  const int64_t rows = logits.shape[0], cols = logits.shape[1];
  const std::vector<float> z = logits.floats();
  std::vector<int32_t> labels;
  for (double v : ref.tensor("labels").values) labels.push_back(int32_t(v));
  std::vector<float> dz(z.size(), 99.0f);
  int64_t correct = -1;
  CpuBackend be;
  // grad_scale 1: the gradient of the summed loss, which the reference holds.
  const double loss = be.softmax_xent(z.data(), labels.data(), rows, cols, 1.0f, dz.data(),
                                      &correct, float(ref.attr("label_smoothing")));
  EXPECT_NEAR(loss, ref.tensor("loss").values.at(0), 1e-6 * std::fabs(loss));
  nn::testing::expect_matches("dlogits", dz, ref.tensor("dlogits"), 1e-6, 1e-7);
  EXPECT_EQ(correct, be.count_correct(z.data(), labels.data(), rows, cols));
}

INSTANTIATE_TEST_SUITE_P(PyTorch, SmoothedXent,
                         ::testing::Values("xent_smoothing", "xent_smoothing_large"));

TEST(SmoothedXent, ZeroIsTheOneHotLossAndOutOfRangeIsAnError) {
  CpuBackend be;
  const std::vector<float> z = {0.5f, -1.0f, 2.0f, 0.25f, 3.0f, -2.0f};
  const std::vector<int32_t> labels = {2, 0};
  std::vector<float> a(6), b(6);
  const double plain = be.softmax_xent(z.data(), labels.data(), 2, 3, 0.5f, a.data(), nullptr);
  const double zero = be.softmax_xent(z.data(), labels.data(), 2, 3, 0.5f, b.data(), nullptr, 0.0f);
  EXPECT_EQ(plain, zero);
  EXPECT_EQ(a, b);
  // Smoothing 1: the target is uniform, so the loss is the mean over classes of -log p.
  const double uniform =
      be.softmax_xent(z.data(), labels.data(), 2, 3, 1.0f, b.data(), nullptr, 1.0f);
  double want = 0;
  for (int r = 0; r < 2; ++r) {
    double sum = 0;
    for (int c = 0; c < 3; ++c) sum += std::exp(double(z[size_t(3 * r + c)]));
    for (int c = 0; c < 3; ++c) want += (std::log(sum) - z[size_t(3 * r + c)]) / 3.0;
  }
  EXPECT_NEAR(uniform, want, 1e-9);
  EXPECT_THROW(be.softmax_xent(z.data(), labels.data(), 2, 3, 1.0f, b.data(), nullptr, -0.1f),
               InputError);
  EXPECT_THROW(be.softmax_xent(z.data(), labels.data(), 2, 3, 1.0f, b.data(), nullptr, 1.5f),
               InputError);
}

}  // namespace
}  // namespace loom
