// The comparison arithmetic of `loom scale --validate`.
#include "loom/experiments/validate.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "loom/core/error.h"

namespace loom::experiments {
using namespace loom::perf;
namespace {

TEST(Validate, ErrorIsSignedAndRelativeToTheMeasurement) {
  EXPECT_DOUBLE_EQ(prediction_error(12e-3, 10e-3), 0.2);
  EXPECT_DOUBLE_EQ(prediction_error(8e-3, 10e-3), -0.2);
  EXPECT_DOUBLE_EQ(prediction_error(10e-3, 10e-3), 0);
  EXPECT_THROW(prediction_error(1, 0), InputError);
}

TEST(Validate, ToleranceIsInclusiveBothWays) {
  EXPECT_TRUE(within_tolerance(0.15, 0.15));
  EXPECT_TRUE(within_tolerance(-0.15, 0.15));
  EXPECT_FALSE(within_tolerance(0.1501, 0.15));
  EXPECT_FALSE(within_tolerance(-0.2, 0.15));
}

TEST(Validate, RowsAndTable) {
  ValidationRow r;
  r.c = {2, "onebit", "thread"};
  r.predicted.step_s = 23e-3;
  r.measured.step_s = 20e-3;
  r.measured.steps = 100;
  EXPECT_NEAR(r.error(), 0.15, 1e-12);
  ValidationRow bad = r;
  bad.predicted.step_s = 30e-3;  // +50%
  const std::string t = validation_table({r, bad}, 0.15);
  EXPECT_NE(t.find("2 workers onebit thread"), std::string::npos) << t;
  EXPECT_NE(t.find("+15.0%"), std::string::npos) << t;
  EXPECT_NE(t.find("+50.0%"), std::string::npos) << t;
  EXPECT_NE(t.find("MISSED"), std::string::npos) << t;
  EXPECT_NE(t.find("1 of 2 runs outside"), std::string::npos) << t;
  const auto j = nlohmann::json::parse(validation_json({r}));
  EXPECT_NEAR(double(j.at("error")), 0.15, 1e-12);
  EXPECT_EQ(j.at("codec"), "onebit");
  EXPECT_EQ(j.at("workers"), 2);
}

TEST(Validate, PairedRatesAreTheMeanOfBeforeAndAfter) {
  HostRates host;
  host.cores = 2;
  host.gemm_flops[{1, 1}] = 100e9;
  host.gemm_flops[{2, 1}] = 90e9;
  host.stream_bytes[2] = 10e9;
  HostRates before, after;
  before.gemm_flops[{2, 1}] = 40e9;
  after.gemm_flops[{2, 1}] = 60e9;
  before.stream_bytes[2] = 4e9;
  after.stream_bytes[2] = 6e9;
  before.elementwise_bytes[2] = 8e9;  // no `after` figure: not merged
  merge_paired_rates(host, before, after);
  EXPECT_DOUBLE_EQ(host.gemm_flops.at({2, 1}), 50e9);
  EXPECT_DOUBLE_EQ(host.gemm_flops.at({1, 1}), 100e9);  // other shapes keep the file's
  EXPECT_DOUBLE_EQ(host.stream_bytes.at(2), 5e9);
  EXPECT_TRUE(host.elementwise_bytes.empty());
}

}  // namespace
}  // namespace loom::experiments
