// The parallelism model on shapes written by hand: perf needs no nn model to run it.
#include "loom/perf/parallelism_model.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace loom::perf {
namespace {

// Dense layers of `widths` (input first), with biases.
ModelShape dense_stack(const std::vector<int64_t>& widths) {
  ModelShape m;
  m.input = widths.front();
  m.classes = widths.back();
  for (size_t i = 0; i + 1 < widths.size(); ++i)
    m.layers.push_back({LayerKind::kDense, widths[i], widths[i + 1],
                        2.0 * double(widths[i] * widths[i + 1]),
                        double(widths[i] * widths[i + 1] + widths[i + 1])});
  return m;
}

ParallelismSetup setup(int workers) {
  ParallelismSetup s;
  s.workers = workers;
  s.batch = 32;
  s.flops_per_s = 1e12;
  s.link = {"l", "test", 1, 10, 1.0, "test"};
  return s;
}

const ParallelismEstimate& find(const std::vector<ParallelismEstimate>& e, const std::string& mode,
                                const std::string& acts) {
  auto it = std::find_if(e.begin(), e.end(), [&](const ParallelismEstimate& x) {
    return x.mode == mode && x.activations == acts;
  });
  EXPECT_NE(it, e.end()) << mode << " " << acts;
  return *it;
}

TEST(ParallelismModel, DataSendsTheRingAllreduceOfAllGradients) {
  const ModelShape m = dense_stack({784, 1024, 1024, 10});
  const double params = 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10;
  const auto e = compare_parallelism(m, setup(4));
  EXPECT_DOUBLE_EQ(find(e, "data", "-").bytes_per_step, 2.0 * 3 / 4 * 4 * params);
  EXPECT_DOUBLE_EQ(find(e, "data", "-").compute_s,
                   3 * 32 * 2.0 * (params - 1024 - 1024 - 10) / 1e12);
}

TEST(ParallelismModel, ModelGathersTheInputAndAllreducesTheRowLayersOutput) {
  // 784 -> 1024 column, 1024 -> 1024 row (allreduce of G x 1024), 1024 -> 10 replicated; the
  // input and the loss gradient gathered.
  const auto e = compare_parallelism(dense_stack({784, 1024, 1024, 10}), setup(4));
  const double G = 4 * 32;
  EXPECT_DOUBLE_EQ(find(e, "model", "fp32").bytes_per_step,
                   2.0 * 3 / 4 * G * 1024 * 4 + 3 * 32 * 784 * 4 + 3 * 32 * 10 * 4);
  EXPECT_GT(find(e, "model", "int8").codec_s, 0);
  EXPECT_LT(find(e, "model", "int8").bytes_per_step, find(e, "model", "fp32").bytes_per_step);
}

TEST(ParallelismModel, HybridOnlyWithParametersBeforeTheFirstDenseLayer) {
  const auto dense = compare_parallelism(dense_stack({784, 1024, 10}), setup(2));
  EXPECT_EQ(dense.size(), 3u);  // data, model fp32, model int8
  EXPECT_TRUE(std::none_of(dense.begin(), dense.end(),
                           [](const ParallelismEstimate& x) { return x.mode == "hybrid"; }));
  ModelShape conv = dense_stack({3136, 1024, 10});
  conv.input = 784;
  conv.layers.insert(conv.layers.begin(), {LayerKind::kOther, 784, 3136, 5e6, 832});
  const auto e = compare_parallelism(conv, setup(2));
  EXPECT_EQ(e.size(), 5u);
  find(e, "hybrid", "fp32");
  find(e, "hybrid", "int8");
  EXPECT_TRUE(std::is_sorted(e.begin(), e.end(), [](const auto& a, const auto& b) {
    return a.samples_per_s > b.samples_per_s;
  }));
}

TEST(ParallelismModel, OneWorkerSendsNothing) {
  for (const auto& x : compare_parallelism(dense_stack({784, 64, 10}), setup(1))) {
    EXPECT_EQ(x.bytes_per_step, 0) << x.mode;
    EXPECT_EQ(x.comm_s, 0) << x.mode;
  }
}

}  // namespace
}  // namespace loom::perf
