#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "loom/core/error.h"
#include "loom/perf/compute_fit.h"
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

// The protocol (docs/perf.md): every case names its publication; none takes its compute from
// a [[rate]] row of its own publication; the set spans every generation the catalog holds.
TEST(Validation, EveryCaseNamesItsPublicationAndTheSetSpansTheGenerations) {
  const Catalog cat = validation_catalog();
  std::set<std::string> publications, generations, precisions;
  int throughput = 0;
  for (const auto& c : validation_cases()) {
    EXPECT_FALSE(c.publication.empty()) << c.name;
    publications.insert(c.publication);
    if (c.figure != "samples_per_s") continue;
    ++throughput;
    generations.insert(gpu_generation(cat.gpu(c.gpu)));
    precisions.insert(math_plan(cat.gpu(c.gpu), c.precision).rate_class());
  }
  EXPECT_GE(throughput, 30);
  EXPECT_GE(publications.size(), 10u);
  for (const char* g : {"pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell"})
    EXPECT_TRUE(generations.count(g)) << g;
  for (const char* p : {"fp32", "mixed", "fp8"}) EXPECT_TRUE(precisions.count(p)) << p;
}

TEST(Validation, NoCaseTakesItsComputeFromItsOwnPublication) {
  const Catalog cat = validation_catalog();
  for (const auto& r : run().results) {
    if (r.compute.rfind("published", 0) != 0 && r.compute.rfind("chip", 0) != 0) continue;
    for (const auto& rate : cat.rates()) {
      if (rate.publication == r.c.publication) {
        EXPECT_EQ(r.compute.find(rate.source), std::string::npos) << r.c.name;
      }
    }
  }
}

// Leave one source out: every case of a publication is predicted by one refit that saw none
// of them; refitting on everything gives back the built-in constants.
TEST(Validation, EachPublicationIsPredictedByOneRefitWithoutIt) {
  ASSERT_EQ(run().loo_fit.size(), run().results.size());
  for (size_t i = 0; i < run().results.size(); ++i)
    for (size_t j = 0; j < run().results.size(); ++j)
      if (run().results[i].c.publication == run().results[j].c.publication) {
        EXPECT_EQ(run().loo_jitter[i], run().loo_jitter[j]);
        EXPECT_EQ(run().loo_fit[i].tensor, run().loo_fit[j].tensor);
      }
  EXPECT_NEAR(run().fitted_jitter, kStepJitterCv, 5e-4);
  EXPECT_NEAR(run().fitted_compute.cuda, kComputeFit.cuda, 0.011);
  EXPECT_NEAR(run().fitted_compute.cuda_shared, kComputeFit.cuda_shared, 0.011);
  EXPECT_NEAR(run().fitted_compute.tensor, kComputeFit.tensor, 0.011);
  EXPECT_NEAR(run().fitted_compute.tensor_volta, kComputeFit.tensor_volta, 0.011);
  EXPECT_NEAR(run().fitted_compute.kernel_s, kComputeFit.kernel_s, 1.1e-6);
  EXPECT_FALSE(run().compute_fit_on.empty());
}

// A left-out publication's roofline is a fixed point of its own fold: refitted once more with
// the fold's jitter holding the rest of each step, it stays where it is, so the fold has left
// the built-in constants (fitted with the publication in) behind.
TEST(Validation, AFoldsRooflineIsItsOwnFixedPoint) {
  const Catalog cat = validation_catalog();
  const auto cases = validation_cases();
  std::set<std::string> done;
  for (size_t i = 0; i < run().results.size(); ++i) {
    const std::string& pub = run().results[i].c.publication;
    if (!done.insert(pub).second) continue;
    const ComputeFit& f = run().loo_fit[i];
    const ComputeFit again =
        fit_compute(compute_fit_points(cat, cases, pub, run().loo_jitter[i], f), f);
    const auto points = compute_fit_points(cat, cases, pub, run().loo_jitter[i], f);
    EXPECT_LE(mean_abs_error(points, again), mean_abs_error(points, f) + 1e-12) << pub;
    EXPECT_NEAR(again.cuda, f.cuda, 0.006) << pub;
    EXPECT_NEAR(again.tensor, f.tensor, 0.006) << pub;
    EXPECT_NEAR(again.kernel_s, f.kernel_s, 0.6e-6) << pub;
  }
  EXPECT_GE(done.size(), 10u);
}

// Regression guards at what the model reaches today (docs/perf.md gives the figures and the
// issue's targets: 12% mean over throughput left out, reached at 10.1%, and no case beyond 25%,
// not met: four are, the worst at 28.0%).
TEST(Validation, LeaveOneSourceOutErrorsStayWhereTheyAre) {
  EXPECT_LE(run().loo_scaling.mean_abs, 0.08);
  EXPECT_LE(run().loo_throughput.mean_abs, 0.105);
  EXPECT_LE(run().loo.mean_abs, 0.10);
  EXPECT_LE(run().loo.max_abs, 0.30);
}

TEST(Validation, ABandComesFromItsGenerationAndPrecisionOrIsWidened) {
  const Catalog cat = validation_catalog();
  const PredictionBand hopper = prediction_band(run(), cat.gpu("h100-sxm"), "bf16", 1);
  EXPECT_GE(hopper.cases, 2);
  EXPECT_GT(hopper.band, 0);
  EXPECT_LE(hopper.typical, hopper.band + 1e-12);
  // No Hopper TF32 case: a wider band, said so.
  const PredictionBand none = prediction_band(run(), cat.gpu("h100-sxm"), "tf32", 1);
  EXPECT_EQ(none.cases, 0);
  EXPECT_NE(none.basis.find("+ 25%"), std::string::npos) << none.basis;
  // Eight GPUs add the scaling error.
  EXPECT_GT(prediction_band(run(), cat.gpu("h100-sxm"), "bf16", 8).band, hopper.band);
}

TEST(Validation, NoComputeAbovePeakOnceExecutedFlopsAreCounted) {
  const Catalog cat = validation_catalog();
  for (const auto& r : cat.rates()) {
    const Workload w = reference_workload(r.workload);
    const std::string math = r.precision == "mixed" ? "fp16" : r.precision;
    const double f =
        r.samples_per_s * executed_train_flops(w, math) / peak_flops(cat.gpu(r.gpu), math);
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

// The InputError parsing `text` raises ("" when it parses).
std::string parse_error(const std::string& text) {
  try {
    parse_validation(text, "t.toml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Validation, BadCasesAreErrorsNamingTheField) {
  const std::string bad = R"([[case]]
name = "x"
source = "s"
publication = "p"
figure = "speedupp"
)";
  const std::string what = parse_error(bad);
  ASSERT_FALSE(what.empty());
  EXPECT_NE(what.find("figure"), std::string::npos) << what;
  const std::string fields = R"([[case]]
name = "x"
source = "s"
publication = "p"
figure = "samples_per_s"
published = 1
workload = "resnet50"
gpu = "v100-sxm2"
precision = "fp16"
)";
  const std::string layout = parse_error(fields + "layout = \"channels_last\"\n");
  EXPECT_NE(layout.find("field 'layout' must be nhwc (channels-last) or nchw, got 'channels_last'"),
            std::string::npos)
      << layout;
  // Every case names the software that trained it (the framework term).
  const std::string software = parse_error(fields);
  EXPECT_NE(software.find("software"), std::string::npos) << software;
  EXPECT_NE(software.find("t.toml"), std::string::npos) << software;
  EXPECT_EQ(parse_error(fields + "software = \"pytorch\"\n"), "");
}

TEST(Validation, ADecoderCaseWithoutBlocksIsRefusedWhereItIsRead) {
  const std::string bad = R"([[case]]
name = "tiny"
source = "s"
publication = "p"
figure = "samples_per_s"
published = 1
workload = "decoder"
layers = 2
heads = 2
d_model = 64
seq = 16
vocab = 1000
params = 1000
gpu = "h100-sxm"
precision = "bf16"
)";
  const std::string what = parse_error(bad);
  ASSERT_FALSE(what.empty());
  EXPECT_NE(what.find("t.toml"), std::string::npos) << what;
  EXPECT_NE(what.find("'workload'"), std::string::npos) << what;
  EXPECT_NE(what.find("nothing for its blocks"), std::string::npos) << what;
}

}  // namespace
}  // namespace loom::perf
