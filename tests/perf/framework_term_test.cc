#include "loom/perf/framework_term.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loom/perf/scale.h"

namespace loom::perf {
namespace {

// A run of throughput cases with the given software, publication and left-out error.
struct Planted {
  std::string software, publication;
  double error;
};
ValidationRun run_of(const std::vector<Planted>& cases) {
  ValidationRun run;
  for (const Planted& p : cases) {
    CaseResult r;
    r.c.name = p.software + "-" + p.publication;
    r.c.figure = "samples_per_s";
    r.c.software = p.software;
    r.c.publication = p.publication;
    run.results.push_back(r);
    run.loo_errors.push_back(p.error);
  }
  return run;
}

TEST(FrameworkTerm, OffsetsAreTheMeanErrorAndTheBandSpansTheSoftwaresWithEnoughCases) {
  ValidationRun run = run_of({{"fast", "a", -0.20},
                              {"fast", "b", -0.10},
                              {"slow", "c", 0.30},
                              {"slow", "c", 0.10},
                              {"lone", "d", 0.90},
                              {"unstated", "e", -0.80}});
  // A scaling case never enters the term.
  run.results.push_back(run.results.front());
  run.results.back().c.figure = "speedup";
  run.loo_errors.push_back(-0.7);
  const FrameworkTerm t = framework_term(run);
  ASSERT_EQ(t.softwares.size(), 3u);  // fast, lone, slow: "unstated" is no software
  ASSERT_TRUE(t.valid());
  EXPECT_EQ(t.low.software, "fast");
  EXPECT_NEAR(t.low.offset, -0.15, 1e-12);
  EXPECT_EQ(t.low.cases, 2);
  EXPECT_EQ(t.low.publications, 2);
  // "lone" has one case: too few for the band, though it has the largest offset.
  EXPECT_EQ(t.high.software, "slow");
  EXPECT_NEAR(t.high.offset, 0.20, 1e-12);
  EXPECT_NEAR(t.high.rms, std::sqrt((0.09 + 0.01) / 2), 1e-12);
  EXPECT_NEAR(t.spread, std::sqrt((0.15 * 0.15 + 0.2 * 0.2) / 2), 1e-12);
  // A published rate lies near predicted / (1 + offset).
  EXPECT_NEAR(t.fastest(100), 100 / 0.85, 1e-9);
  EXPECT_NEAR(t.slowest(100), 100 / 1.2, 1e-9);
  // Only "fast" has cases in two publications: each is corrected by the other's error.
  EXPECT_EQ(t.transferable, 2);
  EXPECT_NEAR(t.mean_abs_as_is, 0.15, 1e-12);
  EXPECT_NEAR(t.mean_abs_with_offset, (std::abs(0.8 / 0.9 - 1) + std::abs(0.9 / 0.8 - 1)) / 2,
              1e-12);
  EXPECT_NE(t.describe().find("fast -15.0% (2 cases) to slow +20.0% (2 cases)"), std::string::npos)
      << t.describe();
}

TEST(FrameworkTerm, WithoutEnoughCasesThereIsNoBand) {
  const FrameworkTerm t = framework_term(run_of({{"one", "a", 0.1}, {"two", "b", -0.1}}));
  EXPECT_FALSE(t.valid());
  EXPECT_EQ(t.transferable, 0);
  EXPECT_EQ(t.describe(), "no software with enough cases");
}

// The built-in set names the software of every case, and its term is a band around the model:
// some software publishes faster than predicted and some slower.
TEST(FrameworkTerm, TheBuiltInSetNamesEveryCasesSoftwareAndSpansTheModel) {
  for (const ValidationCase& c : validation_cases()) EXPECT_FALSE(c.software.empty()) << c.name;
  const FrameworkTerm& t = builtin_framework_term();
  ASSERT_TRUE(t.valid());
  EXPECT_LT(t.low.offset, 0);
  EXPECT_GT(t.high.offset, 0);
  EXPECT_GT(t.spread, 0);
  EXPECT_GT(t.transferable, 0);
  EXPECT_NE(validation_report(builtin_validation()).find("by training software"),
            std::string::npos);
}

// `loom scale` gives the model's band and the framework term with a prediction from the model,
// and neither where the compute rate is the user's own (--derate).
TEST(FrameworkTerm, ScaleGivesTheBandWithAModelsPrediction) {
  const Catalog cat = Catalog::builtin();
  ScaleRequest r;
  r.gpu = "a100-80gb-sxm4";
  r.nodes = 2;
  r.gpus_per_node = 8;
  r.train.batch = 64;
  r.train.precision = "bf16";
  const Workload w = reference_workload("resnet50");
  const ScalePrediction p = predict_scale(cat, w, r);
  EXPECT_NE(p.band_note.find("band: +-"), std::string::npos) << p.band_note;
  EXPECT_NE(p.band_note.find("at 16"), std::string::npos) << p.band_note;
  EXPECT_NE(p.band_note.find("frameworks: "), std::string::npos) << p.band_note;
  // Each point carries its band (wider with more GPUs: the scaling error joins) and the
  // framework range around its samples/s, which the JSON lines and Python's loom.scale give.
  const ScaleSeries& s = p.series.front();
  ASSERT_GE(s.points.size(), 2u);
  EXPECT_GT(s.points.front().band, 0);
  EXPECT_GT(s.points.back().band, s.points.front().band);
  const FrameworkTerm& t = builtin_framework_term();
  for (const ScalePoint& pt : s.points) {
    EXPECT_NEAR(pt.slowest_software_samples_per_s, t.slowest(pt.est.samples_per_s), 1e-9);
    EXPECT_NEAR(pt.fastest_software_samples_per_s, t.fastest(pt.est.samples_per_s), 1e-9);
  }
  EXPECT_EQ(scale_point_json(s, s.points.back())["band"], s.points.back().band);
  r.derate = 0.4;
  const ScalePrediction derated = predict_scale(cat, w, r);
  EXPECT_TRUE(derated.band_note.empty());
  EXPECT_TRUE(
      scale_point_json(derated.series.front(), derated.series.front().points.front())["band"]
          .is_null());
}

}  // namespace
}  // namespace loom::perf
