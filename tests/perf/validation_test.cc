#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "loom/core/error.h"
#include "loom/perf/compute_model.h"
#include "loom/perf/validation_set.h"

namespace loom::perf {
namespace {

const ValidationRun& run() {
  static const ValidationRun r = run_validation(true);
  return r;
}

TEST(Validation, TheSetIsBroad) {
  const auto cases = validation_cases();
  EXPECT_GE(cases.size(), 15u);
  std::set<std::string> figures, algorithms;
  bool slow_compression = false, barely_pays = false;
  for (const auto& c : cases) {
    figures.insert(c.figure);
    algorithms.insert(c.algorithm);
    if (c.figure == "ratio" && c.published > 3) slow_compression = true;
    if (c.figure == "ratio" && c.published < 1.15) barely_pays = true;
  }
  EXPECT_EQ(figures.size(), 4u);
  EXPECT_TRUE(algorithms.count("ps") && algorithms.count("ring") && algorithms.count("two-level"));
  EXPECT_TRUE(slow_compression);
  EXPECT_TRUE(barely_pays);
}

TEST(Validation, EveryPublishedCaseIsWithinThePassMark) {
  for (const auto& r : run().results)
    EXPECT_LE(std::abs(r.error()), kPassMark)
        << r.c.name << ": published " << r.c.published << ", predicted " << r.predicted;
  EXPECT_LE(run().in_sample.mean_abs, 0.08);
}

TEST(Validation, EveryCaseIsWithinThePassMarkWithTheJitterFittedWithoutIt) {
  for (size_t i = 0; i < run().results.size(); ++i)
    EXPECT_LE(std::abs(run().loo_errors[i]), kPassMark) << run().results[i].c.name;
  EXPECT_LE(run().loo.mean_abs, 0.08);
}

TEST(Validation, TheJitterConstantIsTheFitOverTheSet) {
  EXPECT_NEAR(run().fitted_jitter, kStepJitterCv, 5e-4);
}

TEST(Validation, NoComputeAbovePeakOnceExecutedFlopsAreCounted) {
  const Catalog cat = validation_catalog();
  for (const auto& r : cat.rates()) {
    const Workload w = reference_workload(r.workload);
    const double f = r.samples_per_s * executed_train_flops(w, r.precision) /
                     peak_flops(cat.gpu(r.gpu), r.precision);
    EXPECT_LE(f, 1.0) << r.gpu << " " << r.workload << " " << r.precision << " " << r.batch;
    EXPECT_GT(f, 0.05) << r.gpu << " " << r.workload;
  }
  for (const auto& r : run().results) EXPECT_LE(r.fraction_of_peak, 1.0) << r.c.name;
}

TEST(Validation, VggOnAP100ExceedsPeakOnlyInNominalFlops) {
  const Catalog cat = Catalog::builtin();
  const Workload vgg = reference_workload("vgg16");
  const double rate = cat.rate("p100-sxm2", "vgg16", "fp32", 64)->samples_per_s;
  const double peak = peak_flops(cat.gpu("p100-sxm2"), "fp32");
  EXPECT_GT(rate * vgg.train_flops() / peak, 1.0);
  EXPECT_LT(rate * executed_train_flops(vgg, "fp32") / peak, 0.75);
}

TEST(Validation, CompressionGainsMoreOnTheSlowerLink) {
  double ethernet = 0, infiniband = 0;
  for (const auto& r : run().results) {
    if (r.c.name == "tang-onebit-bert-ethernet-64") ethernet = r.predicted;
    if (r.c.name == "tang-onebit-bert-infiniband-64") infiniband = r.predicted;
  }
  EXPECT_GT(ethernet, 2 * infiniband);
  EXPECT_GT(infiniband, 1.0);
}

TEST(Validation, BadCasesAreErrorsNamingTheField) {
  const std::string bad = R"([[case]]
name = "x"
source = "s"
figure = "speedupp"
)";
  try {
    parse_validation(bad, "t.toml");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("figure"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom::perf
