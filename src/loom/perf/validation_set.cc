#include "loom/perf/validation_set.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "loom/core/error.h"
#include "loom/perf/compute_model.h"
#include "loom/perf/toml_rows.h"

namespace loom::perf {

// The built-in validation set's text (generated from data/hardware/validation.toml).
extern const char* const kBuiltinValidationToml;

namespace {

const char* kBuiltinValidationName = "data/hardware/validation.toml (built in)";

const std::vector<std::string> kFigures = {"efficiency", "speedup", "samples_per_s", "ratio"};

}  // namespace

std::vector<ValidationCase> parse_validation(const std::string& text, const std::string& name,
                                             Catalog* links_into) {
  toml::table root = parse_toml_table(text, name);
  for (auto& [k, v] : root) {
    std::string key(k.str());
    if (key != "case" && key != "link")
      throw InputError(
          fmt::format("{}: unknown section '{}'; expected [[case]] or [[link]]", name, key));
  }
  if (links_into && root.get("link")) {
    toml::table links;
    links.insert("link", *root.get("link"));
    std::stringstream ss;
    ss << links;
    links_into->load_text(ss.str(), name);
  }
  std::vector<ValidationCase> out;
  for_rows(root, name, "case", [&](const RowReader& r) {
    r.check_known({"name",          "source",        "figure",    "published", "baseline_gpus",
                   "workload",      "gpu",           "precision", "batch",     "nodes",
                   "gpus_per_node", "nics_per_node", "intra",     "inter",     "algorithm",
                   "servers",       "colocated",     "aggregate", "codec",     "base_codec",
                   "bucket_mb",     "overlap",       "framework", "note"});
    ValidationCase c;
    c.name = r.str("name");
    c.source = r.str("source");
    c.figure = r.str("figure");
    if (std::find(kFigures.begin(), kFigures.end(), c.figure) == kFigures.end())
      r.fail("figure", fmt::format("must be one of {}", fmt::join(kFigures, ", ")));
    c.published = r.num("published");
    c.baseline_gpus = r.count("baseline_gpus", 1);
    c.workload = r.str("workload");
    c.gpu = r.str("gpu");
    c.precision = r.str("precision");
    c.batch = r.count("batch", 64);
    c.nodes = r.count("nodes", 1);
    c.gpus_per_node = r.count("gpus_per_node", 1);
    c.nics_per_node = r.count("nics_per_node", 1);
    c.intra = r.str("intra");
    c.inter = r.str("inter");
    c.algorithm = r.str("algorithm");
    c.servers = r.count("servers", 1);
    c.colocated = r.flag("colocated", false);
    c.aggregate = r.flag("aggregate", false);
    c.codec = r.str("codec");
    c.base_codec = r.str("base_codec", false);
    if (c.figure == "ratio" && c.base_codec.empty())
      r.fail("base_codec", "is needed for a ratio figure");
    c.bucket_mb = r.num("bucket_mb");
    c.overlap = r.flag("overlap", true);
    c.framework = r.str("framework");
    c.note = r.str("note", false);
    out.push_back(c);
  });
  return out;
}

std::vector<ValidationCase> validation_cases() {
  return parse_validation(kBuiltinValidationToml, kBuiltinValidationName);
}

Catalog validation_catalog() {
  Catalog cat = Catalog::builtin();
  parse_validation(kBuiltinValidationToml, kBuiltinValidationName, &cat);
  return cat;
}

namespace {

// Samples/s of the case's system on `nodes` x `k` GPUs with `codec`.
struct Predictor {
  const Catalog& cat;
  const ValidationCase& c;
  double jitter_cv;
  Workload w = reference_workload(c.workload);
  ComputeRate rate = compute_rate(cat, cat.gpu(c.gpu), w, c.precision, double(c.batch));

  CostModel model(const std::string& codec) const {
    Cluster cl;
    cl.gpu = cat.gpu(c.gpu);
    cl.topo.nodes = c.nodes;
    cl.topo.gpus_per_node = c.gpus_per_node;
    cl.topo.intra = cat.link(c.intra);
    cl.topo.inter = cat.link(c.inter);
    cl.topo.nics_per_node = c.nics_per_node;
    cl.topo.servers = c.servers;
    cl.topo.servers_colocated = c.colocated;
    cl.topo.aggregate = c.aggregate;
    SyncSpec s;
    s.algorithm = c.algorithm;
    s.codec = codec;
    s.bucket_mb = c.bucket_mb;
    s.overlap = c.overlap;
    // The published systems cast (fp16) before their hierarchical allreduce.
    s.codec_inside_nodes = true;
    s.step_overhead_s = cat.framework(c.framework).step_overhead_ms * 1e-3;
    s.step_agreement_bytes = 0;  // other systems' runs: no loom step guard
    TrainSpec t;
    t.batch = c.batch;
    t.precision = c.precision;
    t.optimizer = c.workload.rfind("bert", 0) == 0 ? "adam" : "momentum";
    Derating d;
    d.jitter_cv = jitter_cv;
    if (rate.method == "roofline")
      d.compute = rate.efficiency;
    else
      d.sample_s = rate.sample_s;
    return CostModel(w, cl, s, t, d);
  }

  StepEstimate at(const std::string& codec, int nodes, int k) const {
    return model(codec).estimate_at(nodes, k);
  }
};

// A case's figure as a function of the jitter: every estimate it needs is linear in it,
// step(cv) = step(0) + cv x (step(1) - step(0)) (the straggler term; the cases' input is
// hidden by prefetch), so fitting the jitter needs each estimate only twice.
struct CaseCurve {
  ValidationCase c;
  struct Point {
    double samples = 0, step0 = 0, slope = 0;
    double samples_per_s(double cv) const { return samples / (step0 + cv * slope); }
  };
  Point main, base;  // base: the efficiency's baseline, speedup's one GPU, ratio's base codec

  double predicted(double cv) const {
    const double sps = main.samples_per_s(cv);
    if (c.figure == "samples_per_s") return sps;
    const double ref = base.samples_per_s(cv);
    if (c.figure == "ratio") return sps / ref;
    const double per_gpu = sps / c.gpus(), ref_per_gpu = ref / (base.samples / double(c.batch));
    return c.figure == "speedup" ? sps / ref : 100 * per_gpu / ref_per_gpu;
  }
};

CaseCurve curve(const Catalog& cat, const ValidationCase& c) {
  auto point = [&](const std::string& codec, int nodes, int k) {
    CaseCurve::Point p;
    const StepEstimate e0 = Predictor{cat, c, 0}.at(codec, nodes, k);
    const StepEstimate e1 = Predictor{cat, c, 1}.at(codec, nodes, k);
    p.samples = double(e0.ranks) * double(c.batch);
    p.step0 = e0.step_s;
    p.slope = e1.step_s - e0.step_s;
    return p;
  };
  CaseCurve cc;
  cc.c = c;
  cc.main = point(c.codec, c.nodes, c.gpus_per_node);
  if (c.figure == "efficiency") {
    const int b = c.baseline_gpus;
    cc.base = b <= c.gpus_per_node ? point(c.codec, 1, b)
                                   : point(c.codec, b / c.gpus_per_node, c.gpus_per_node);
  } else if (c.figure == "speedup") {
    cc.base = point(c.codec, 1, 1);
  } else if (c.figure == "ratio") {
    cc.base = point(c.base_codec, c.nodes, c.gpus_per_node);
  }
  return cc;
}

double fit(const std::vector<CaseCurve>& curves) {
  double best = 0, best_err = 1e300;
  for (int i = 0; i <= 2000; ++i) {
    const double cv = 1e-4 * i;
    double err = 0;
    for (const auto& k : curves) err += std::abs(k.predicted(cv) / k.c.published - 1);
    if (err < best_err - 1e-12) best_err = err, best = cv;
  }
  return best;
}

}  // namespace

CaseResult predict_case(const Catalog& cat, const ValidationCase& c, double jitter_cv) {
  Predictor p{cat, c, jitter_cv};
  CaseResult r;
  r.c = c;
  r.compute = describe(p.rate);
  r.fraction_of_peak = p.rate.fraction_of_peak;
  r.est = p.at(c.codec, c.nodes, c.gpus_per_node);
  r.predicted = curve(cat, c).predicted(jitter_cv);
  return r;
}

double fit_jitter(const Catalog& cat, const std::vector<ValidationCase>& cases) {
  std::vector<CaseCurve> curves;
  for (const auto& c : cases) curves.push_back(curve(cat, c));
  return fit(curves);
}

ErrorSummary summarize(const std::vector<double>& errors) {
  ErrorSummary s;
  for (double e : errors) {
    s.mean_abs += std::abs(e);
    s.max_abs = std::max(s.max_abs, std::abs(e));
    s.misses += std::abs(e) > kPassMark ? 1 : 0;
  }
  if (!errors.empty()) s.mean_abs /= errors.size();
  return s;
}

ValidationRun run_validation(bool leave_one_out) {
  const Catalog cat = validation_catalog();
  const std::vector<ValidationCase> cases = validation_cases();
  ValidationRun run;
  std::vector<double> errors;
  std::vector<CaseCurve> curves;
  for (const auto& c : cases) {
    run.results.push_back(predict_case(cat, c));
    errors.push_back(run.results.back().error());
    curves.push_back(curve(cat, c));
  }
  run.in_sample = summarize(errors);
  if (leave_one_out) {
    run.fitted_jitter = fit(curves);
    for (size_t i = 0; i < curves.size(); ++i) {
      std::vector<CaseCurve> rest = curves;
      rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
      const double cv = fit(rest);
      run.loo_jitter.push_back(cv);
      run.loo_errors.push_back(curves[i].predicted(cv) / cases[i].published - 1);
    }
    run.loo = summarize(run.loo_errors);
  }
  return run;
}

std::string validation_report(const ValidationRun& run) {
  std::string o = fmt::format(
      "Published results against loom's performance model (pass: within {:.0f}% of the published "
      "figure; step-time jitter {:.4f})\n\n",
      100 * kPassMark, kStepJitterCv);
  const bool loo = !run.loo_errors.empty();
  o += fmt::format("{:<30} {:>6} {:<13} {:>10} {:>10} {:>8} {:>8}  {}\n", "case", "GPUs", "figure",
                   "published", "predicted", "error", loo ? "LOO" : "", "");
  for (size_t i = 0; i < run.results.size(); ++i) {
    const CaseResult& r = run.results[i];
    const bool miss = !r.ok() || (loo && std::abs(run.loo_errors[i]) > kPassMark);
    o += fmt::format("{:<30} {:>6} {:<13} {:>10.2f} {:>10.2f} {:>+7.1f}% {:>8}  {}\n", r.c.name,
                     r.c.gpus(), r.c.figure, r.c.published, r.predicted, 100 * r.error(),
                     loo ? fmt::format("{:+.1f}%", 100 * run.loo_errors[i]) : "",
                     miss ? "MISS" : "ok");
  }
  o += fmt::format("\n{} cases; mean |error| {:.1f}%, max {:.1f}%, {} outside {:.0f}%\n",
                   run.results.size(), 100 * run.in_sample.mean_abs, 100 * run.in_sample.max_abs,
                   run.in_sample.misses, 100 * kPassMark);
  if (loo)
    o += fmt::format(
        "leave-one-out (jitter refitted without the case, {:.4f}..{:.4f}): mean |error| {:.1f}%, "
        "max {:.1f}%, {} outside {:.0f}%; refitted on all cases: {:.4f}\n",
        *std::min_element(run.loo_jitter.begin(), run.loo_jitter.end()),
        *std::max_element(run.loo_jitter.begin(), run.loo_jitter.end()), 100 * run.loo.mean_abs,
        100 * run.loo.max_abs, run.loo.misses, 100 * kPassMark, run.fitted_jitter);
  o += "\nWhat each step is made of (the case's full size), and where its compute comes from:\n";
  for (const auto& r : run.results) {
    const StepEstimate& e = r.est;
    o += fmt::format(
        "- {}: step {} = compute {} + exposed communication {} (of {} on the link, codec {}) + "
        "stragglers {} + framework {}; dominant: {}; compute {:.0f}% of peak in executed FLOPs "
        "({})\n",
        r.c.name, format_seconds(e.step_s), format_seconds(e.compute_s()),
        format_seconds(e.comm_exposed_s), format_seconds(e.comm_s), format_seconds(e.codec_s),
        format_seconds(e.straggler_s), format_seconds(e.overhead_s), e.dominant(),
        100 * r.fraction_of_peak, r.compute);
  }
  o += "\nSources and assumptions:\n";
  for (const auto& r : run.results)
    o += fmt::format("- {} ({} {}, {} x {} {}, {} {}{}): {}.{}\n", r.c.name, r.c.workload,
                     r.c.precision, r.c.nodes, r.c.gpus_per_node, r.c.gpu, r.c.algorithm, r.c.codec,
                     r.c.base_codec.empty() ? "" : " vs " + r.c.base_codec, r.c.source,
                     r.c.note.empty() ? "" : " Assumed: " + r.c.note + ".");
  return o;
}

}  // namespace loom::perf
