// The comparison arithmetic of `loom scale --validate`.
#include "loom/perf/validate.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "loom/core/error.h"

namespace loom::perf {
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

}  // namespace
}  // namespace loom::perf
