#include "loom/perf/validation_set.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "loom/core/error.h"
#include "loom/perf/compute_model.h"
#include "loom/perf/framework_term.h"
#include "loom/perf/toml_rows.h"

namespace loom::perf {

// The built-in validation set's text (generated from data/hardware/validation.toml).
extern const char* const kBuiltinValidationToml;

namespace {

const char* kBuiltinValidationName = "data/hardware/validation.toml (built in)";

const std::vector<std::string> kFigures = {"efficiency", "speedup", "samples_per_s", "ratio"};

}  // namespace

double rms(const std::vector<double>& errors) {
  double sq = 0;
  for (double e : errors) sq += e * e;
  return errors.empty() ? 0 : std::sqrt(sq / static_cast<double>(errors.size()));
}

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
    r.check_known({"name",          "source",        "figure",    "published",     "baseline_gpus",
                   "workload",      "gpu",           "precision", "batch",         "nodes",
                   "gpus_per_node", "nics_per_node", "intra",     "inter",         "algorithm",
                   "servers",       "colocated",     "aggregate", "codec",         "base_codec",
                   "bucket_mb",     "overlap",       "framework", "note",          "publication",
                   "accumulate",    "layers",        "heads",     "d_model",       "seq",
                   "vocab",         "params",        "fused",     "untied_output", "recompute",
                   "layout",        "software"});
    ValidationCase c;
    c.name = r.str("name");
    c.source = r.str("source");
    c.publication = r.str("publication");
    c.figure = r.str("figure");
    if (std::find(kFigures.begin(), kFigures.end(), c.figure) == kFigures.end())
      r.fail("figure", fmt::format("must be one of {}", fmt::join(kFigures, ", ")));
    c.published = r.num("published");
    c.baseline_gpus = r.count("baseline_gpus", 1);
    c.workload = r.str("workload");
    c.gpu = r.str("gpu");
    c.precision = r.str("precision");
    if (!is_precision(c.precision))
      r.fail("precision", fmt::format("must be {}, got '{}'", kPrecisionNames, c.precision));
    c.layout = r.str("layout", false, "nhwc");
    if (!is_layout(c.layout))
      r.fail("layout", fmt::format("must be {}, got '{}'", kLayoutNames, c.layout));
    c.decoder = c.workload == "decoder";
    if (c.decoder) {
      DecoderShape& d = c.decoder_shape;
      d.name = c.name;
      d.layers = r.count("layers", 0);
      d.heads = r.count("heads", 0);
      d.d_model = r.num("d_model");
      d.seq = r.num("seq");
      d.vocab = r.num("vocab");
      d.params = r.num("params");
      d.fused = r.flag("fused", false);
      d.untied_output = r.flag("untied_output", false);
      d.recompute = r.flag("recompute", false);
      try {
        decoder_workload(d);
      } catch (const InputError& e) {
        r.fail("workload", fmt::format("= \"decoder\": {}", e.what()));
      }
    }
    c.accumulate = r.count("accumulate", 1);
    c.batch = r.count("batch", 64);
    c.nodes = r.count("nodes", 1);
    c.gpus_per_node = r.count("gpus_per_node", 1);
    c.nics_per_node = r.count("nics_per_node", 1);
    // One GPU, or one machine: the links default to the GPU's own (resolved at prediction).
    const bool one_machine = c.nodes == 1;
    c.intra = r.str("intra", !one_machine);
    c.inter = r.str("inter", !one_machine);
    c.algorithm = r.str("algorithm", false, "ring");
    c.servers = r.count("servers", 1);
    c.colocated = r.flag("colocated", false);
    c.aggregate = r.flag("aggregate", false);
    c.codec = r.str("codec", false, "fp32");
    c.base_codec = r.str("base_codec", false);
    if (c.figure == "ratio" && c.base_codec.empty())
      r.fail("base_codec", "is needed for a ratio figure");
    c.bucket_mb = r.num("bucket_mb", false, false, 25);
    c.overlap = r.flag("overlap", true);
    c.framework = r.str("framework", false, "none");
    c.note = r.str("note", false);
    // Last, so that a case's other errors are named first.
    c.software = r.str("software");
    out.push_back(c);
  });
  return out;
}

Workload ValidationCase::workload_spec() const {
  return decoder ? decoder_workload(decoder_shape) : reference_workload(workload);
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
  ComputeFit fit = kComputeFit;
  Workload w = c.workload_spec();
  ComputeRate rate = compute_rate(cat, cat.gpu(c.gpu), w, c.precision, double(c.batch), fit,
                                  c.publication, c.layout);

  CostModel model(const std::string& codec) const {
    Cluster cl;
    cl.gpu = cat.gpu(c.gpu);
    cl.topo.nodes = c.nodes;
    cl.topo.gpus_per_node = c.gpus_per_node;
    cl.topo.intra = c.intra.empty() ? cat.intra_link_of(cl.gpu) : cat.link(c.intra);
    cl.topo.inter = c.inter.empty() ? cl.topo.intra : cat.link(c.inter);
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
    t.layout = c.layout;
    t.accumulate = c.accumulate;
    t.optimizer = c.decoder || c.workload.rfind("bert", 0) == 0 ? "adam" : "momentum";
    Derating d;
    d.jitter_cv = jitter_cv;
    d.memory = fit.memory;
    d.use(rate);
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
    const double per_gpu = sps / c.gpus(),
                 ref_per_gpu = ref / (base.samples / double(c.batch * c.accumulate));
    return c.figure == "speedup" ? sps / ref : 100 * per_gpu / ref_per_gpu;
  }
};

CaseCurve curve(const Catalog& cat, const ValidationCase& c, const ComputeFit& fit) {
  const Predictor p0{cat, c, 0, fit}, p1{cat, c, 1, fit};
  auto point = [&](const std::string& codec, int nodes, int k) {
    CaseCurve::Point p;
    const StepEstimate e0 = p0.at(codec, nodes, k);
    const StepEstimate e1 = p1.at(codec, nodes, k);
    p.samples = double(e0.ranks) * double(c.batch * c.accumulate);
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

CaseResult predict_case(const Catalog& cat, const ValidationCase& c, double jitter_cv,
                        const ComputeFit& fit) {
  Predictor p{cat, c, jitter_cv, fit};
  CaseResult r;
  r.c = c;
  r.compute = describe(p.rate);
  r.fraction_of_peak = p.rate.fraction_of_peak;
  r.generation = gpu_generation(cat.gpu(c.gpu));
  r.precision_class = math_plan(cat.gpu(c.gpu), c.precision).rate_class();
  r.est = p.at(c.codec, c.nodes, c.gpus_per_node);
  r.predicted = curve(cat, c, fit).predicted(jitter_cv);
  return r;
}

namespace {

// A [[rate]] row as a one-GPU throughput case of its own publication.
ValidationCase rate_case(const RateSpec& r) {
  ValidationCase c;
  c.name = fmt::format("rate {} {} {} b{:g}", r.gpu, r.workload, r.precision, r.batch);
  c.source = r.source;
  c.publication = r.publication;
  c.figure = "samples_per_s";
  c.published = r.samples_per_s;
  c.workload = r.workload;
  c.gpu = r.gpu;
  c.precision = r.precision;
  c.layout = r.layout;
  c.batch = static_cast<int64_t>(r.batch);
  return c;
}

}  // namespace

std::vector<FitPoint> compute_fit_points(const Catalog& cat,
                                         const std::vector<ValidationCase>& cases,
                                         const std::string& left_out, double jitter_cv,
                                         const ComputeFit& held) {
  std::vector<ValidationCase> all;
  for (const auto& c : cases)
    if (c.figure == "samples_per_s") all.push_back(c);
  const auto names = reference_workload_names();
  for (const auto& r : cat.rates())
    if (std::find(names.begin(), names.end(), r.workload) != names.end())
      all.push_back(rate_case(r));
  std::vector<FitPoint> points;
  for (const auto& c : all) {
    if (!left_out.empty() && c.publication == left_out) continue;
    const Predictor p{cat, c, jitter_cv, held};
    if (p.rate.method != "roofline") continue;  // a published rate does not depend on the fit
    const GpuSpec& g = cat.gpu(c.gpu);
    FitPoint f;
    f.name = c.name;
    f.publication = c.publication;
    f.parts = roofline_parts(g, p.w, math_plan(g, c.precision, c.layout), double(c.batch));
    f.micro_steps = double(c.accumulate);
    f.samples = double(c.batch) * f.micro_steps;
    const StepEstimate e = p.at(c.codec, c.nodes, c.gpus_per_node);
    f.rest_s = e.step_s - (f.samples * f.parts.sample_s(held) +
                           f.micro_steps * f.parts.kernels * held.kernel_s);
    f.per_gpu_published = c.published / c.gpus();
    points.push_back(f);
  }
  return points;
}

const ValidationRun& builtin_validation() {
  static const ValidationRun run = run_validation(true);
  return run;
}

PredictionBand prediction_band(const ValidationRun& run, const GpuSpec& g,
                               const std::string& precision, int gpus) {
  std::map<std::string, std::vector<double>> by_group;
  std::vector<double> all, scaling;
  for (size_t i = 0; i < run.results.size() && i < run.loo_errors.size(); ++i) {
    const CaseResult& r = run.results[i];
    if (r.c.figure != "samples_per_s") {
      scaling.push_back(run.loo_errors[i]);
      continue;
    }
    by_group[r.generation + " " + r.precision_class].push_back(run.loo_errors[i]);
    by_group["generation " + r.generation].push_back(run.loo_errors[i]);
    by_group["precision " + r.precision_class].push_back(run.loo_errors[i]);
    all.push_back(run.loo_errors[i]);
  }
  const std::string gen = gpu_generation(g), cls = math_plan(g, precision).rate_class();
  const std::string key = gen + " " + cls;
  PredictionBand b;
  auto take = [&](const std::vector<double>& v, double widen) {
    b.band = widen * rms(v);
    b.typical = widen * summarize(v).mean_abs;
  };
  if (by_group.count(key) && by_group[key].size() >= 2) {
    b.cases = static_cast<int>(by_group[key].size());
    take(by_group[key], 1.0);
    b.basis = fmt::format("{}: {} cases", key, b.cases);
  } else {
    b.cases = by_group.count(key) ? static_cast<int>(by_group[key].size()) : 0;
    const std::vector<double>* wider = nullptr;
    std::string from;
    for (const std::string& k : {"generation " + gen, "precision " + cls}) {
      if (!by_group.count(k) || by_group[k].size() < 2) continue;
      if (!wider || rms(by_group[k]) > rms(*wider)) wider = &by_group[k], from = k;
    }
    if (wider) {
      take(*wider, 1.25);
      b.basis = fmt::format("{} case(s) of {}: the {} cases' band + 25%", b.cases, key, from);
    } else {
      take(all, 1.0);
      b.basis = fmt::format("no case of {}: the widest of all", key);
    }
  }
  if (gpus > 1 && !scaling.empty()) {
    b.band = std::hypot(b.band, rms(scaling));
    b.typical = std::hypot(b.typical, summarize(scaling).mean_abs);
    b.basis += fmt::format(", with the scaling cases' {:.0f}%", 100 * rms(scaling));
  }
  return b;
}

std::string gpu_generation(const GpuSpec& g) {
  if (g.vendor != "nvidia" || g.cuda_cc <= 0) return "other";
  const double cc = g.cuda_cc;
  if (cc < 5) return "kepler";
  if (cc < 7) return "pascal";
  if (cc < 7.5) return "volta";
  if (cc < 8) return "turing";
  if (cc < 8.9) return "ampere";
  if (cc < 9) return "ada";
  if (cc < 10) return "hopper";
  return "blackwell";
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
    curves.push_back(curve(cat, c, kComputeFit));
  }
  run.in_sample = summarize(errors);
  if (!leave_one_out) return run;
  const std::vector<FitPoint> points = compute_fit_points(cat, cases);
  for (const auto& p : points) run.compute_fit_on.push_back(p.name);
  run.fitted_compute = fit_compute(points);
  run.fitted_jitter = fit(curves);
  // Leave one source out: every case and [[rate]] row of a publication at once.
  run.loo_errors.assign(cases.size(), 0);
  run.loo_jitter.assign(cases.size(), 0);
  run.loo_fit.assign(cases.size(), kComputeFit);
  std::vector<std::string> publications;
  for (const auto& c : cases)
    if (std::find(publications.begin(), publications.end(), c.publication) == publications.end())
      publications.push_back(c.publication);
  for (const auto& pub : publications) {
    // The roofline and the jitter refitted in turn without the publication: each fit holds
    // the other's part of a step (the stragglers in the roofline's points, the compute in the
    // jitter's curves), so neither keeps what the built-in constants learnt from the case.
    ComputeFit f = kComputeFit;
    double cv = kStepJitterCv;
    for (int round = 0; round < kLeaveOutRounds; ++round) {
      const ComputeFit before = f;
      const double cv_before = cv;
      f = fit_compute(compute_fit_points(cat, cases, pub, cv, f), f);
      std::vector<CaseCurve> rest;
      for (const auto& c : cases)
        if (c.publication != pub) rest.push_back(curve(cat, c, f));
      cv = fit(rest);
      if (f == before && cv == cv_before) break;
    }
    for (size_t i = 0; i < cases.size(); ++i) {
      if (cases[i].publication != pub) continue;
      run.loo_fit[i] = f;
      run.loo_jitter[i] = cv;
      run.loo_errors[i] = curve(cat, cases[i], f).predicted(cv) / cases[i].published - 1;
    }
  }
  run.loo = summarize(run.loo_errors);
  std::vector<double> throughput, scaling;
  for (size_t i = 0; i < cases.size(); ++i)
    (cases[i].figure == "samples_per_s" ? throughput : scaling).push_back(run.loo_errors[i]);
  run.loo_throughput = summarize(throughput);
  run.loo_scaling = summarize(scaling);
  return run;
}

namespace {

// The framework term's table (framework_term.h).
std::string framework_report(const FrameworkTerm& t) {
  std::string o =
      "\nThroughput LOSO error by training software (the framework term: its offset is the mean "
      "error):\n";
  for (const SoftwareOffset& s : t.softwares)
    o += fmt::format(
        "  {:<18} {:>2} cases from {} publication(s)  offset {:>+6.1f}%  root mean square "
        "{:>5.1f}%{}\n",
        s.software, s.cases, s.publications, 100 * s.offset, 100 * s.rms,
        s.cases < kFrameworkMinCases ? "  (too few cases for the band)" : "");
  o += fmt::format("  frameworks: {}\n", t.describe());
  if (t.transferable > 0)
    o += fmt::format(
        "  applied from the software's other publications to its {} cases that have one: mean "
        "|error| {:.1f}% as is, {:.1f}% with the offset ({})\n",
        t.transferable, 100 * t.mean_abs_as_is, 100 * t.mean_abs_with_offset,
        t.mean_abs_with_offset < t.mean_abs_as_is ? "it would help"
                                                  : "it does not help, so it stays a band");
  return o;
}

}  // namespace

std::string validation_report(const ValidationRun& run) {
  std::string o = fmt::format(
      "Published results against loom's performance model (pass: within {:.0f}% of the published "
      "figure; step-time jitter {:.4f}; GPU roofline: {})\n"
      "LOSO: predicted with the jitter and the roofline refitted without every case and rate of "
      "the case's publication\n\n",
      100 * kPassMark, kStepJitterCv, describe(kComputeFit));
  const bool loo = !run.loo_errors.empty();
  o += fmt::format("{:<34} {:>5} {:<13} {:>10} {:>10} {:>8} {:>8}  {}\n", "case", "GPUs", "figure",
                   "published", "predicted", "error", loo ? "LOSO" : "", "");
  for (size_t i = 0; i < run.results.size(); ++i) {
    const CaseResult& r = run.results[i];
    const bool miss = !r.ok() || (loo && std::abs(run.loo_errors[i]) > kPassMark);
    o += fmt::format("{:<34} {:>5} {:<13} {:>10.2f} {:>10.2f} {:>+7.1f}% {:>8}  {}\n", r.c.name,
                     r.c.gpus(), r.c.figure, r.c.published, r.predicted, 100 * r.error(),
                     loo ? fmt::format("{:+.1f}%", 100 * run.loo_errors[i]) : "",
                     miss ? "MISS" : "ok");
  }
  std::vector<std::string> pubs;
  for (const auto& r : run.results)
    if (std::find(pubs.begin(), pubs.end(), r.c.publication) == pubs.end())
      pubs.push_back(r.c.publication);
  o += fmt::format(
      "\n{} cases from {} publications; in sample: mean |error| {:.1f}%, max {:.1f}%, "
      "{} outside {:.0f}%\n",
      run.results.size(), pubs.size(), 100 * run.in_sample.mean_abs, 100 * run.in_sample.max_abs,
      run.in_sample.misses, 100 * kPassMark);
  if (loo) {
    auto line = [&](const char* what, const ErrorSummary& e) {
      o += fmt::format(
          "leave one source out, {}: mean |error| {:.1f}%, max {:.1f}%, {} outside "
          "{:.0f}%\n",
          what, 100 * e.mean_abs, 100 * e.max_abs, e.misses, 100 * kPassMark);
    };
    line("all cases", run.loo);
    line("throughput (samples_per_s)", run.loo_throughput);
    line("scaling (efficiency, speedup, ratio)", run.loo_scaling);
    // The band a prediction carries: LOSO errors by GPU generation and precision.
    std::map<std::string, std::vector<double>> bands;
    for (size_t i = 0; i < run.results.size(); ++i) {
      const CaseResult& r = run.results[i];
      if (r.c.figure == "samples_per_s")
        bands[r.generation + " " + r.precision_class].push_back(run.loo_errors[i]);
    }
    o += "\nThroughput LOSO error by GPU generation and precision (the advisor's bands):\n";
    for (const auto& [k, v] : bands) {
      const ErrorSummary e = summarize(v);
      o += fmt::format(
          "  {:<18} {:>2} cases  mean |error| {:>5.1f}%  root mean square (the band) {:>5.1f}%  "
          "max "
          "{:>5.1f}%\n",
          k, v.size(), 100 * e.mean_abs, 100 * rms(v), 100 * e.max_abs);
    }
    o += framework_report(framework_term(run));
    o += fmt::format(
        "\nFitted parameters (refitted on all: jitter {:.4f}; roofline {}, memory held):\n"
        "- the jitter: every case above;\n- the roofline: {} throughput figures whose compute is "
        "the roofline's: {}\n",
        run.fitted_jitter, describe(run.fitted_compute), run.compute_fit_on.size(),
        fmt::join(run.compute_fit_on, ", "));
  }
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
