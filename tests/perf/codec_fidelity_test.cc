// The calibration from a codec's fidelity to its accuracy cost (perf/codec_fidelity.h): the
// built-in cases, the verdict on each side of the boundary and between, how the budget moves
// the boundary, and the file's errors.
#include "loom/perf/codec_fidelity.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "loom/core/error.h"

namespace loom::perf {
namespace {

using ::testing::HasSubstr;

CodecFidelity with_drift(double drift, double growth = 1.0) {
  CodecFidelity f;
  f.codec = "onebit";
  f.steps = 30;
  f.drift = drift;
  f.update_cosine = 0.9;
  f.residual_growth = growth;
  return f;
}

FidelityCase one_case(const std::string& codec, AccuracyMetric metric, double drift, double loss) {
  return FidelityCase{.network = std::string("n"),
                      .optimizer = std::string("sgd"),
                      .codec = codec,
                      .workers = 2,
                      .metric = metric,
                      .drift = drift,
                      .update_cosine = 1,
                      .steps = 30,
                      .loss = loss,
                      .seeds = 1,
                      .source = std::string("test")};
}

TEST(FidelityCalibration, TheBuiltinCasesSpanBothSidesAndNameTheirSources) {
  const FidelityCalibration cal = builtin_fidelity_calibration();
  ASSERT_GE(cal.cases.size(), 4u);
  int points = 0, bits = 0;
  for (const FidelityCase& c : cal.cases) {
    EXPECT_FALSE(c.source.empty()) << c.network << " " << c.codec;
    EXPECT_GE(c.steps, 1);
    (c.metric == AccuracyMetric::kPoints ? points : bits)++;
  }
  EXPECT_GT(points, 0);
  EXPECT_GT(bits, 0);
  // At the default budgets some cases kept their accuracy and some did not.
  const FidelityVerdict v = assess_fidelity(with_drift(0), cal, 0.5, 0.05);
  EXPECT_GT(v.cases_within, 0);
  EXPECT_GT(v.cases_over, 0);
  EXPECT_LT(v.within_drift, v.over_drift);
}

TEST(FidelityCalibration, TheVerdictFollowsTheCasesOnEachSideAndBetween) {
  FidelityCalibration cal;
  cal.cases = {one_case("int8", AccuracyMetric::kPoints, 0.001, 0.1),
               one_case("onebit", AccuracyMetric::kPoints, 0.1, 0.2),
               one_case("topk", AccuracyMetric::kPoints, 0.6, 0.3),
               one_case("onebit", AccuracyMetric::kBits, 0.4, 0.2)};
  // The bits case is over 0.05 bits; the topk case kept its accuracy at a larger drift, but
  // the over case undercuts it: the boundary is 0.1 .. 0.4.
  FidelityVerdict v = assess_fidelity(with_drift(0.05), cal, 0.5, 0.05);
  EXPECT_EQ(v.risk, FidelityRisk::kWithin) << v.why;
  EXPECT_DOUBLE_EQ(v.within_drift, 0.1);
  EXPECT_DOUBLE_EQ(v.over_drift, 0.4);
  EXPECT_EQ(v.cases_within, 3);
  EXPECT_EQ(v.cases_over, 1);
  EXPECT_THAT(v.why, HasSubstr("calibrated on 4 cases"));
  EXPECT_EQ(assess_fidelity(with_drift(0.1), cal, 0.5, 0.05).risk, FidelityRisk::kWithin);
  EXPECT_EQ(assess_fidelity(with_drift(0.2), cal, 0.5, 0.05).risk, FidelityRisk::kUnknown);
  EXPECT_EQ(assess_fidelity(with_drift(0.4), cal, 0.5, 0.05).risk, FidelityRisk::kOver);
  // A tighter points budget: the 0.2-point case is over too, and the boundary moves down.
  v = assess_fidelity(with_drift(0.05), cal, 0.15, 0.05);
  EXPECT_EQ(v.risk, FidelityRisk::kUnknown) << v.why;
  EXPECT_DOUBLE_EQ(v.within_drift, 0.001);
  EXPECT_DOUBLE_EQ(v.over_drift, 0.1);
  // A looser bits budget: nothing is over, and every drift up to the largest case is within.
  v = assess_fidelity(with_drift(0.5), cal, 0.5, 0.5);
  EXPECT_EQ(v.risk, FidelityRisk::kWithin);
  EXPECT_TRUE(std::isinf(v.over_drift));
  EXPECT_EQ(verdict_json(v)["over_drift"], nullptr);
  // Beyond every case, with none over: unknown, not within.
  EXPECT_EQ(assess_fidelity(with_drift(0.7), cal, 0.5, 0.5).risk, FidelityRisk::kUnknown);
}

TEST(FidelityCalibration, AGrowingResidualOrANonFiniteReplayIsOverWhateverTheDrift) {
  const FidelityCalibration cal = builtin_fidelity_calibration();
  const FidelityVerdict v = assess_fidelity(with_drift(0, 2.5), cal, 0.5, 0.05);
  EXPECT_EQ(v.risk, FidelityRisk::kOver);
  EXPECT_TRUE(v.residual_growing);
  EXPECT_THAT(v.why, HasSubstr("grew 2.5x"));
  const FidelityVerdict nan = assess_fidelity(with_drift(NAN), cal, 0.5, 0.05);
  EXPECT_EQ(nan.risk, FidelityRisk::kOver);
  EXPECT_FALSE(nan.residual_growing);
}

TEST(FidelityCalibration, BadFilesNameTheFileTheCaseAndTheField) {
  const std::string ok =
      "network = \"n\"\noptimizer = \"sgd\"\ncodec = \"int8\"\nmetric = \"points\"\n"
      "drift = 0.1\nupdate_cosine = 0.9\nsteps = 30\nloss = -0.1\nsource = \"s\"\n";
  const auto file = [](int version, const std::string& row) {
    return fmt::format("format_version = {}\n[[case]]\n{}", version, row);
  };
  const FidelityCalibration cal = parse_fidelity_calibration(file(1, ok), "fid.toml");
  ASSERT_EQ(cal.cases.size(), 1u);
  EXPECT_DOUBLE_EQ(cal.cases[0].loss, -0.1);
  EXPECT_EQ(cal.cases[0].workers, 2);
  const auto refused = [&](const std::string& text, const std::string& what) {
    try {
      parse_fidelity_calibration(text, "fid.toml");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr("fid.toml"));
      EXPECT_THAT(e.what(), HasSubstr(what));
    }
  };
  refused(file(2, ok), "newer");
  refused(fmt::format("[[case]]\n{}", ok), "format_version");
  refused("format_version = 1\n", "no [[case]]");
  refused(file(1, fmt::format("{}colour = 1\n", ok)), "'colour'");
  std::string bad = ok;
  bad.replace(bad.find("\"points\""), 8, "\"miles\"");
  refused(file(1, bad), "field 'metric'");
  bad = ok;
  bad.replace(bad.find("drift = 0.1"), 11, "drift = -1");
  refused(file(1, bad), "field 'drift'");
  bad = ok;
  bad.replace(bad.find("update_cosine = 0.9"), 19, "update_cosine = 1.5");
  refused(file(1, bad), "field 'update_cosine'");
}

}  // namespace
}  // namespace loom::perf
