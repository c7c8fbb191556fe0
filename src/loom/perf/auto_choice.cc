#include "loom/perf/auto_choice.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "loom/core/error.h"
#include "loom/perf/toml_rows.h"

namespace loom::perf {

extern const char* const kBuiltinCodecAccuracyToml;

namespace {

constexpr const char* kBuiltinAccuracyName = "data/perf/codec_accuracy.toml";

bool known_codec(const std::string& c) {
  const auto names = codec_names();
  return std::find(names.begin(), names.end(), c) != names.end();
}

// The machine of the prediction: one node of `ranks` workers joined by the measured link,
// with no memory limit (a CPU host's memory is not the question here).
Cluster measured_cluster(const AutoRequest& r, const AutoMeasurements& m) {
  Cluster c;
  c.gpu.name = "this-machine";
  c.gpu.fp32_tflops = 1;
  c.gpu.memory_gb = 1e6;
  c.gpu.mem_bw_gbs = 100;
  c.topo.nodes = 1;
  c.topo.gpus_per_node = r.ranks;
  LinkSpec l;
  l.name = "measured";
  l.kind = "measured";  // its alpha holds the launch cost (collective_model.h)
  l.gbs = m.link.bytes_per_s / 1e9;
  l.latency_us = m.link.alpha_s * 1e6;
  c.topo.intra = l;
  c.topo.inter = l;
  c.storage.read_mbs = 1e9;  // the loader is not what is chosen here
  return c;
}

StepEstimate predict(const AutoRequest& r, const AutoMeasurements& m, const AutoCandidate& k) {
  SyncSpec s;
  s.codec = k.codec;
  s.bmuf = k.sync == "bmuf";
  s.tau = s.bmuf ? k.tau : 1;
  s.bucket_mb = k.bucket_kib > 0 ? double(k.bucket_kib) * 1024 / 1e6
                                 : 4 * r.workload.params() / 1e6 + 1;  // 0 = one bucket
  s.overlap = r.overlap;
  // loom's 1-bit starts after an exact warm-up of 1% of the run, at most 10 steps.
  if (k.codec == "onebit" && r.total_steps > 0 && !s.bmuf)
    s.codec_warmup_share =
        double(std::min<int64_t>(10, r.total_steps / 100)) / double(r.total_steps);
  TrainSpec t;
  t.batch = r.batch;
  Derating d;
  d.sample_s = m.compute_s / double(r.batch);
  d.whole_step = true;  // the measured step's compute holds its update
  d.jitter_cv = 0;      // the measured step already holds this machine's spread
  d.codec_enc_dec_gbs = m.codec_gbs;
  d.host.link_steal = m.link_steal;
  const CostModel model(r.workload, measured_cluster(r, m), s, t, d);
  return model.estimate_at(1, r.ranks);
}

std::string budget_text(const AutoRequest& r) {
  const int digits = r.network.metric == AccuracyMetric::kPoints ? 2 : 3;
  return fmt::format("{:.{}f} {}", r.budget(), digits, metric_unit(r.network.metric));
}

constexpr const char* kNoEvidence = "no evidence of its accuracy cost";

// Why a lossy candidate may not be chosen ("" = it may), and whether only for want of evidence
// (no row, no fidelity yet, a cost unknown), which auto.lossy = true would accept.
struct Exclusion {
  std::string why;
  bool wants_evidence = false;
};

// The exclusion of lossy candidate k, filling in what is known of its accuracy: the matching
// row of the table, and its fidelity on the run's gradients with the calibration's verdict
// (auto_choice.h, "Accuracy").
Exclusion accuracy_exclusion(const AutoRequest& r, const AutoMeasurements& m,
                             const AccuracyTable& accuracy, AutoCandidate& k) {
  const AccuracyDelta* a = accuracy.find(r.network, k.codec, k.sync, k.tau);
  if (a) k.measured = *a;
  const CodecFidelity* f = k.sync == "allreduce" ? m.fidelity_of(k.codec) : nullptr;
  if (f) {
    k.fidelity = *f;
    k.verdict = assess_fidelity(*f, accuracy.fidelity, r.max_accuracy_delta, r.max_bits_delta);
  }
  if (r.lossy == LossyPolicy::kNever) return {"lossy options are forbidden (auto.lossy = false)"};
  if (a && a->loss() > r.budget())
    return {fmt::format("its measured accuracy cost {} is over the budget of {}", a->delta_text(),
                        budget_text(r))};
  // A matching row decides, unless the run's own residuals show the codec falling behind.
  if (k.verdict && k.verdict->residual_growing)
    return {fmt::format("its error-feedback residual grows on this run's gradients: {}",
                        k.verdict->why)};
  if (a) return {};
  if (k.verdict && k.verdict->risk == FidelityRisk::kOver)
    return {fmt::format("its fidelity on this run's gradients puts it over the budget of {}: {}",
                        budget_text(r), k.verdict->why)};
  if (k.verdict && k.verdict->risk == FidelityRisk::kWithin) return {};
  if (r.lossy == LossyPolicy::kAlways) return {};
  if (k.verdict)
    return {fmt::format("{}: its fidelity on this run's gradients lies between the calibration "
                        "cases (auto.lossy = true accepts the unknown cost): {}",
                        kNoEvidence, k.verdict->why),
            true};
  if (k.sync == "bmuf")
    return {
        fmt::format("{}: no accuracy row matches this network ({}, {}, {} workers) for "
                    "block momentum, whose local steps a replay of gradients does not show "
                    "(auto.lossy = true accepts the unknown cost)",
                    kNoEvidence, r.network.family.empty() ? "a graph of its own" : r.network.family,
                    r.network.optimizer, r.network.workers),
        true};
  if (!m.fidelity_pending.empty())
    return {fmt::format("{} yet: its fidelity is {}", kNoEvidence, m.fidelity_pending), true};
  return {fmt::format("{}: no accuracy row matches this network and its fidelity was not "
                      "measured (auto.lossy = true accepts the unknown cost)",
                      kNoEvidence),
          true};
}

}  // namespace

const AccuracyDelta* AccuracyTable::find(const NetworkKey& network, const std::string& codec,
                                         const std::string& sync, int tau) const {
  if (network.family.empty()) return nullptr;
  for (const auto& d : rows)
    if (d.metric == network.metric && d.family == network.family &&
        d.optimizer == network.optimizer && d.workers == network.workers && d.codec == codec &&
        d.sync == sync && (sync != "bmuf" || d.tau == tau))
      return &d;
  return nullptr;
}

const CodecFidelity* AutoMeasurements::fidelity_of(const std::string& codec) const {
  for (const auto& f : fidelity)
    if (f.codec == codec) return &f;
  return nullptr;
}

AccuracyTable parse_accuracy_table(const std::string& text, const std::string& name) {
  const toml::table root = parse_toml_table(text, name);
  const auto* v = root.get("format_version");
  if (!v || !v->is_integer())
    throw InputError(fmt::format("{}: 'format_version' must be a whole number", name));
  const int64_t version = **v->as_integer();
  if (version > kAccuracyTableFormatVersion)
    throw InputError(
        fmt::format("{}: accuracy table format version {} is newer than this loom reads ({})", name,
                    version, kAccuracyTableFormatVersion));
  if (version < 2)
    throw InputError(fmt::format(
        "{}: accuracy table format version {} keys its rows by a reference job's name; version "
        "2 and later key them by family, optimizer and workers",
        name, version));
  AccuracyTable t;
  t.file = name;
  for_rows(root, name, "delta", [&](const RowReader& row) {
    row.check_known({"family", "optimizer", "workers", "codec", "sync", "tau", "points", "bits",
                     "seeds", "epochs", "source"});
    AccuracyDelta d;
    d.family = row.str("family");
    d.optimizer = row.str("optimizer");
    d.workers = row.count("workers", 0);
    if (d.workers < 2) row.fail("workers", "is required and must be at least 2");
    d.codec = row.str("codec");
    if (!known_codec(d.codec)) row.fail("codec", fmt::format("'{}' is not a codec", d.codec));
    d.sync = row.str("sync");
    if (d.sync != "allreduce" && d.sync != "bmuf")
      row.fail("sync", fmt::format("must be \"allreduce\" or \"bmuf\", got '{}'", d.sync));
    d.tau = row.count("tau", 0);
    if (d.sync == "bmuf" && d.tau < 1) row.fail("tau", "is required for sync = \"bmuf\"");
    const bool points = row.has("points"), bits = row.has("bits");
    if (points && bits) row.fail("bits", "and 'points' are both given; a row has one metric");
    if (!points && !bits)
      row.fail("points", "is missing (or 'bits', for a token run): the difference from fp32");
    if (bits && version < 3) row.fail("bits", "needs format_version 3");
    d.metric = points ? AccuracyMetric::kPoints : AccuracyMetric::kBits;
    const char* key = metric_unit(d.metric);  // the field is named as the unit
    d.delta = row.signed_num(key);
    const double limit = points ? 100 : 8;  // points of accuracy; bits per byte at most 8
    if (std::abs(d.delta) > limit)
      row.fail(key, fmt::format("must be in [-{}, {}], got {}", limit, limit, d.delta));
    d.seeds = row.count("seeds", 1);
    d.epochs = row.count("epochs", 0);
    d.source = row.str("source");
    t.rows.push_back(d);
  });
  return t;
}

AccuracyTable builtin_accuracy_table() {
  AccuracyTable t = parse_accuracy_table(kBuiltinCodecAccuracyToml, kBuiltinAccuracyName);
  t.fidelity = builtin_fidelity_calibration();
  return t;
}

std::string AccuracyDelta::delta_text() const {
  return metric == AccuracyMetric::kPoints ? fmt::format("{:+.2f} points", delta)
                                           : fmt::format("{:+.4f} bits", delta);
}

std::string AutoCandidate::label() const {
  return fmt::format("{}, {}{}, buckets {}", codec, sync,
                     sync == "bmuf" ? fmt::format(" tau {}", tau) : "",
                     bucket_kib > 0 ? fmt::format("{} KiB", bucket_kib) : "one");
}

AutoDecision decide_auto(const AutoRequest& r, const AutoMeasurements& m,
                         const AccuracyTable& accuracy) {
  if (r.codecs.empty() || r.syncs.empty() || r.bucket_kib.empty())
    throw InputError("auto: no candidate codec, sync or bucket size to choose among");
  if (!(m.compute_s > 0) || !(m.link.bytes_per_s > 0))
    throw InputError(fmt::format(
        "auto: the measurements ({}) have no step compute time or link bandwidth", m.source));
  if (r.ranks < 1 || r.batch < 1) throw InputError("auto: need ranks >= 1 and batch >= 1");
  for (const auto& c : r.codecs)
    if (!known_codec(c)) throw InputError(fmt::format("auto: '{}' is not a codec", c));
  for (const auto& s : r.syncs)
    if (s != "allreduce" && s != "bmuf")
      throw InputError(fmt::format("auto: sync '{}' is not a candidate (allreduce, bmuf)", s));

  // Block momentum sends the whole model once a block in chunks of the bucket size, which the
  // model does not price: one candidate, at the default 4 MiB when that is allowed.
  const int64_t bmuf_kib =
      std::find(r.bucket_kib.begin(), r.bucket_kib.end(), 4096) != r.bucket_kib.end()
          ? 4096
          : r.bucket_kib.front();
  AutoDecision d;
  bool unmeasured_lossy = false;  // a lossy option left out only for want of evidence
  for (const auto& sync : r.syncs)
    for (const auto& codec : r.codecs)
      for (int64_t kib : r.bucket_kib) {
        if (sync == "bmuf" && kib != bmuf_kib) continue;
        AutoCandidate k;
        k.codec = codec;
        k.sync = sync;
        k.tau = sync == "bmuf" ? r.bmuf_tau : 0;
        k.bucket_kib = kib;
        // A codec without its measured speed would be predicted at the GPU roofline's
        // memory passes, which mean nothing here.
        if (codec != "fp32" && !m.codec_gbs.count(codec)) {
          k.excluded = "its encode/decode speed was not measured";
        } else {
          k.estimate = predict(r, m, k);
        }
        if (k.excluded.empty() && !k.lossless()) {
          const Exclusion e = accuracy_exclusion(r, m, accuracy, k);
          k.excluded = e.why;
          unmeasured_lossy = unmeasured_lossy || e.wants_evidence;
        }
        d.candidates.push_back(k);
      }
  // Fastest first; those never predicted (no codec speed) last.
  std::stable_sort(d.candidates.begin(), d.candidates.end(),
                   [](const AutoCandidate& a, const AutoCandidate& b) {
                     return a.estimate.samples_per_s > b.estimate.samples_per_s;
                   });
  const AutoCandidate* best = nullptr;
  const AutoCandidate* best_lossless = nullptr;
  for (const auto& k : d.candidates) {
    if (k.lossless())
      d.fp32_samples_per_s = std::max(d.fp32_samples_per_s, k.estimate.samples_per_s);
    if (!k.excluded.empty()) continue;
    if (!best) best = &k;
    if (k.lossless() && !best_lossless) best_lossless = &k;
  }
  bool gain_too_small = false;
  if (best && best_lossless && best != best_lossless &&
      best->estimate.samples_per_s < (1 + r.min_gain) * best_lossless->estimate.samples_per_s) {
    best = best_lossless;
    gain_too_small = true;
  }
  for (const auto& k : d.candidates)
    if (best && k.excluded.empty() && (k.codec != best->codec || k.sync != best->sync)) {
      d.runner_up = k;
      break;
    }
  if (!best) {
    // Only lossy options were allowed by the config, and the budget excludes them all.
    std::string why;
    for (const auto& k : d.candidates) why += fmt::format("\n  {}: {}", k.label(), k.excluded);
    throw InputError(fmt::format(
        "auto: no allowed candidate (the config fixes what auto may choose among, and the "
        "accuracy budget excludes each):{}",
        why));
  }
  d.chosen = *best;

  const StepEstimate& e = d.chosen.estimate;
  std::string reason =
      fmt::format("{} predicted at {:.0f} samples/s", d.chosen.label(), e.samples_per_s);
  if (d.fp32_samples_per_s > 0 && !d.chosen.lossless())
    reason += fmt::format(", {:.2f}x fp32 through the allreduce ({:.0f} samples/s)",
                          e.samples_per_s / d.fp32_samples_per_s, d.fp32_samples_per_s);
  if (d.chosen.measured)
    reason += fmt::format("; measured accuracy {} against fp32 (budget {})",
                          d.chosen.measured->delta_text(), budget_text(r));
  else if (d.chosen.verdict && d.chosen.verdict->risk == FidelityRisk::kWithin)
    reason += fmt::format("; its fidelity on this run's gradients is within the budget ({})",
                          d.chosen.verdict->why);
  else if (!d.chosen.lossless())
    reason += "; its accuracy cost on this network is unknown (auto.lossy = true)";
  reason += ".";
  const double exposed = e.comm_exposed_s / e.step_s;
  const char* waiting =
      m.fidelity_pending.empty()
          ? " The faster lossy options have no evidence of their accuracy cost on this network; "
            "auto.lossy = true lets it choose one."
          : " The faster lossy options wait for their fidelity on this run's gradients.";
  if (e.dominant() == "exposed communication" || exposed > 0.5) {
    reason += fmt::format(
        " The link will dominate: {:.0f}% of the predicted step is exposed "
        "communication.",
        100 * exposed);
    if (d.chosen.lossless()) {
      if (r.lossy == LossyPolicy::kNever)
        reason += " Lossy codecs are forbidden (auto.lossy = false); they would send fewer bytes.";
      else if (unmeasured_lossy)
        reason += waiting;
    }
  } else if (d.chosen.lossless() && unmeasured_lossy) {
    reason += waiting;
  }
  if (gain_too_small && d.runner_up)
    reason += fmt::format(
        " The fastest lossy option ({}) is predicted only {:.1f}% faster, "
        "inside the model's error: not worth its accuracy cost.",
        d.runner_up->label(), 100 * (d.runner_up->estimate.samples_per_s / e.samples_per_s - 1));
  d.reason = reason;
  return d;
}

StepEstimate predict_candidate(const AutoRequest& r, const AutoMeasurements& m,
                               const AutoCandidate& k) {
  AutoRequest steady = r;
  steady.total_steps = 0;
  return predict(steady, m, k);
}

bool same_configuration(const AutoCandidate& a, const AutoCandidate& b) {
  return a.codec == b.codec && a.sync == b.sync && a.tau == b.tau && a.bucket_kib == b.bucket_kib;
}

namespace {

// The start-up figures with the step's compute times `compute` and the link's time per byte
// times `link`. Its latency stays as measured: a window contradicts the exchange's time, which
// the gradients' bytes set, and the latency also prices the step's small agreement
// (SyncSpec::step_agreement_bytes), whose time a slower stream of bytes does not change.
AutoMeasurements scaled(const AutoMeasurements& m, double compute, double link, double steal = 0) {
  AutoMeasurements c = m;
  c.compute_s = m.compute_s * compute;
  c.forward_s = m.forward_s * compute;
  c.link.bytes_per_s = m.link.bytes_per_s / link;
  c.link_steal = steal;
  return c;
}

// The x in [lo, hi] at which f, non-decreasing in x, reaches `target`: bisection (on a log
// scale when `geometric`), clamped to the ends when the target lies beyond them.
template <typename F>
double solve_between(F f, double target, double lo, double hi, bool geometric) {
  if (f(lo) >= target) return lo;
  if (f(hi) <= target) return hi;
  auto middle = [&] { return geometric ? std::sqrt(lo * hi) : (lo + hi) / 2; };
  for (int i = 0; i < 80; ++i) {
    const double mid = middle();
    (f(mid) < target ? lo : hi) = mid;
  }
  return middle();
}

// A factor on a time (the compute's, the link's): in [1e-6, 1e9], on a log scale.
template <typename F>
double solve_factor(F f, double target) {
  return solve_between(f, target, 1e-6, 1e9, true);
}

// A share of a rate (link_steal): in [0, 1].
template <typename F>
double solve_share(F f, double target) {
  return solve_between(f, target, 0.0, 1.0, false);
}

// The outcome of a re-decision v.revised for the running choice: kept when it is still first,
// or when the new first is not min_gain faster; switched to the new first otherwise, or at
// once when the accuracy rules now exclude the running choice (a fall back).
void conclude_revision(AutoRevision& v, const AutoRequest& r, const AutoCandidate& running,
                       const std::string& text) {
  const AutoDecision& d = *v.revised;
  const AutoCandidate* now = nullptr;
  for (const auto& k : d.candidates)
    if (same_configuration(k, running)) now = &k;
  const double now_sps = now ? now->estimate.samples_per_s : 0;
  if (same_configuration(d.chosen, running)) {
    v.outcome = RevisionOutcome::kKept;
    v.after = d.chosen;
    v.reason = text + fmt::format(", {} is still first, at {:.0f} samples/s", running.label(),
                                  d.chosen.estimate.samples_per_s);
  } else if (now && !now->excluded.empty()) {
    v.outcome = RevisionOutcome::kSwitched;
    v.after = d.chosen;
    v.reason = text + fmt::format(
                          ", {} may no longer run ({}): falling back to {} at {:.0f} "
                          "samples/s",
                          running.label(), now->excluded, d.chosen.label(),
                          d.chosen.estimate.samples_per_s);
  } else if (now && d.chosen.estimate.samples_per_s < (1 + r.min_gain) * now_sps) {
    v.outcome = RevisionOutcome::kKept;
    v.after = *now;
    v.reason = text + fmt::format(
                          ", {} is first at {:.0f} samples/s but only {:.1f}% faster than {} "
                          "({:.0f}), under the {:.0f}% a switch must gain: the choice stands",
                          d.chosen.label(), d.chosen.estimate.samples_per_s,
                          100 * (d.chosen.estimate.samples_per_s / now_sps - 1), running.label(),
                          now_sps, 100 * r.min_gain);
  } else {
    v.outcome = RevisionOutcome::kSwitched;
    v.after = d.chosen;
    v.reason =
        text + fmt::format(
                   ", {} is first at {:.0f} samples/s against {:.0f} for {}: switching "
                   "to it",
                   d.chosen.label(), d.chosen.estimate.samples_per_s, now_sps, running.label());
  }
}

}  // namespace

AutoRevision revise_auto(const AutoRequest& r, const AutoMeasurements& m,
                         const AccuracyTable& accuracy, const AutoCandidate& running,
                         const AutoObservation& o) {
  if (!(o.step_s > 0) || o.steps < 1 || !(o.exposed_comm_s >= 0))
    throw InputError(fmt::format(
        "auto: the check window (steps {}, {} s a step, {} s exposed communication) measured "
        "nothing",
        o.steps, o.step_s, o.exposed_comm_s));
  AutoRevision v;
  v.observed = o;
  v.before = running;
  const StepEstimate e = predict_candidate(r, m, running);
  v.before.estimate = e;
  v.after = v.before;
  v.predicted_step_s = e.step_s;
  v.predicted_exposed_s = e.comm_exposed_s;
  v.error = e.step_s / o.step_s - 1;
  v.corrected = m;
  const std::string window = fmt::format("steps {}-{}", o.first_step, o.first_step + o.steps - 1);
  AutoRequest steady = r;
  steady.total_steps = 0;
  if (std::abs(v.error) <= kModelValidatedError) {
    v.outcome = RevisionOutcome::kAgrees;
    v.reason = fmt::format(
        "the measured step {} ({}) is {:+.1f}% against the predicted {}, within the model's "
        "validated error of {:.0f}%",
        format_seconds(o.step_s), window, 100 * (o.step_s / e.step_s - 1), format_seconds(e.step_s),
        100 * kModelValidatedError);
    if (m.fidelity.empty()) {
      v.reason += ": the choice stands";
      return v;
    }
    // The timing stands; the accuracy may not: rank again with the fidelity.
    v.revised = decide_auto(steady, m, accuracy);
    conclude_revision(v, r, running,
                      v.reason +
                          "; with each codec's fidelity on this run's "
                          "gradients");
    if (v.outcome == RevisionOutcome::kKept && same_configuration(v.after, running))
      v.outcome = RevisionOutcome::kAgrees;
    return v;
  }

  // Fold the window into the figures, correcting the terms it contradicts: a term (the
  // exposed communication, or the rest of the step) is contradicted when it is off by more
  // than half the bound, as a share of the measured step; two terms each within that could
  // not put the step outside the bound. The link's time is scaled until the running choice's
  // exposed communication is the measured one, the compute until the rest of its step is the
  // rest of the measured step. Overlap hides communication behind compute, so each depends on
  // the other: with both contradicted, a few alternating passes settle them.
  const double rest = std::max(0.0, o.step_s - o.exposed_comm_s);
  const double tolerance = kModelValidatedError / 2 * o.step_s;
  bool fix_link = std::abs(o.exposed_comm_s - e.comm_exposed_s) > tolerance;
  bool fix_compute = rest > 0 && std::abs(rest - (e.step_s - e.comm_exposed_s)) > tolerance;
  if (!fix_link && !fix_compute) fix_link = fix_compute = rest > 0;  // the step is off all the same
  if (!fix_compute) fix_link = true;
  // With an overlapped exchange, the forward (nothing runs beside it) says how fast the compute
  // itself ran; the rest of the step beyond that is the communication thread's.
  const bool overlapped = r.overlap && running.sync == "allreduce" && r.ranks > 1;
  const double own =
      overlapped && o.forward_s > 0 && m.forward_s > 0 ? o.forward_s / m.forward_s : 0;
  double c = 1, l = 1, st = 0;
  auto rest_at = [&](double compute, double steal) {
    const StepEstimate k = predict(steady, scaled(m, compute, l, steal), running);
    return k.step_s - k.comm_exposed_s;
  };
  for (int pass = 0; pass < (fix_link && fix_compute ? 4 : 1); ++pass) {
    if (fix_link)
      l = solve_factor(
          [&](double x) { return predict(steady, scaled(m, c, x, st), running).comm_exposed_s; },
          o.exposed_comm_s);
    if (!fix_compute) continue;
    if (own > 0 && rest_at(own, 0) < rest) {
      c = own;
      st = solve_share([&](double s) { return rest_at(c, s); }, rest);
      if (st == 1.0) c = solve_factor([&](double x) { return rest_at(x, st); }, rest);
    } else {
      st = 0;
      c = solve_factor([&](double x) { return rest_at(x, 0); }, rest);
    }
  }
  v.compute_factor = c;
  v.link_factor = l;
  v.link_steal = st;
  v.corrected = scaled(m, c, l, st);
  v.corrected.source =
      st > 0 ? fmt::format(
                   "{}, corrected by {} (compute x{:.3g}, link time x{:.3g}, the communication "
                   "thread taking {:.0f}% of the compute beside backward)",
                   m.source, window, c, l, 100 * st)
             : fmt::format("{}, corrected by {} (compute x{:.3g}, link time x{:.3g})", m.source,
                           window, c, l);
  // From here the run is past any warm-up: the candidates are ranked at their steady step.
  v.revised = decide_auto(steady, v.corrected, accuracy);
  conclude_revision(
      v, r, running,
      fmt::format(
          "the measured step {} ({}) is {:+.1f}% against the predicted {} (exposed communication "
          "{} measured, {} predicted), outside the model's validated error of {:.0f}%; with the "
          "compute x{:.3g}{} and the link's time x{:.3g}",
          format_seconds(o.step_s), window, 100 * (o.step_s / e.step_s - 1),
          format_seconds(e.step_s), format_seconds(o.exposed_comm_s),
          format_seconds(e.comm_exposed_s), 100 * kModelValidatedError, c,
          st > 0 ? fmt::format(" (as its forward ran), the communication thread taking {:.0f}% "
                               "of it beside backward,",
                               100 * st)
                 : std::string(),
          l));
  return v;
}

std::string describe_revision(const AutoRevision& v) {
  const char* what = v.outcome == RevisionOutcome::kAgrees ? "checked"
                     : v.switched()                        ? "re-decided, switched"
                                                           : "re-decided, kept";
  std::string o = fmt::format("auto: {}: {}.\n", what, v.reason);
  if (v.revised) o += describe_decision(*v.revised, v.corrected);
  return o;
}

namespace {
nlohmann::json candidate_json(const AutoCandidate& k) {
  nlohmann::json j = {{"codec", k.codec},
                      {"sync", k.sync},
                      {"bucket_kib", k.bucket_kib},
                      {"predicted_samples_per_s", k.estimate.samples_per_s},
                      {"predicted_step_s", k.estimate.step_s},
                      {"predicted_exposed_comm_s", k.estimate.comm_exposed_s}};
  if (k.sync == "bmuf") j["tau"] = k.tau;
  if (k.measured) {
    j[fmt::format("accuracy_delta_{}", metric_unit(k.measured->metric))] = k.measured->delta;
    j["accuracy_source"] = k.measured->source;
  }
  if (k.fidelity) j["fidelity"] = fidelity_json(*k.fidelity);
  if (k.verdict) j["fidelity_verdict"] = verdict_json(*k.verdict);
  if (!k.excluded.empty()) j["excluded"] = k.excluded;
  return j;
}
}  // namespace

nlohmann::json revision_json(const AutoRevision& v) {
  nlohmann::json j = {
      {"outcome", v.outcome == RevisionOutcome::kAgrees ? "agrees"
                  : v.switched()                        ? "switched"
                                                        : "kept"},
      {"bound", kModelValidatedError},
      {"window", {{"first_step", v.observed.first_step}, {"steps", v.observed.steps}}},
      {"measured",
       {{"step_s", v.observed.step_s},
        {"exposed_comm_s", v.observed.exposed_comm_s},
        {"forward_s", v.observed.forward_s}}},
      {"predicted", {{"step_s", v.predicted_step_s}, {"exposed_comm_s", v.predicted_exposed_s}}},
      {"error", v.error},
      {"before", candidate_json(v.before)},
      {"after", candidate_json(v.after)},
      {"reason", v.reason}};
  if (v.revised) {
    j["corrected"] = {{"compute_factor", v.compute_factor},
                      {"link_factor", v.link_factor},
                      {"link_steal", v.link_steal},
                      {"compute_s", v.corrected.compute_s},
                      {"link_bytes_per_s", v.corrected.link.bytes_per_s},
                      {"link_alpha_s", v.corrected.link.alpha_s}};
    j["runner_up"] = v.revised->runner_up ? candidate_json(*v.revised->runner_up) : nullptr;
    j["candidates"] = nlohmann::json::array();
    for (const auto& k : v.revised->candidates) j["candidates"].push_back(candidate_json(k));
  }
  return j;
}

AutoMeasurements measurements_from_calibration(const Calibration& cal, const std::string& transport,
                                               const AutoRequest& r, int threads) {
  AutoMeasurements m;
  m.source = cal.file;
  if (r.ranks > 1) {
    const auto it = cal.allreduce.find(transport);
    if (it == cal.allreduce.end() || it->second.empty())
      throw InputError(
          fmt::format("{}: no allreduce lines for transport '{}'", cal.file, transport));
    m.link = Calibration::fit_ring(it->second);
  } else {
    m.link.bytes_per_s = 1e12;  // one worker sends nothing
  }
  if (!cal.host.valid())
    throw InputError(fmt::format(
        "{}: no host rates (gemm with workers/threads, membw op add, host cores): write the "
        "file with `loom bench calibrate`",
        cal.file));
  m.codec_gbs = cal.codec_enc_dec_gbs;
  for (const auto& [k, v] : cal.host.busy_codec_gbs) m.codec_gbs[k] = v;
  // The step's compute as the host model predicts it from the file's rates: one worker of
  // `ranks` computing at once, the optimizer unsharded, nothing overlapped.
  Catalog cat = Catalog::builtin();
  Derating d;
  cal.apply(cat, d);
  Cluster c = measured_cluster(r, m);
  SyncSpec s;
  s.overlap = false;
  TrainSpec t;
  t.batch = r.batch;
  t.threads = threads;
  const StepEstimate e = CostModel(r.workload, c, s, t, d).estimate_at(1, r.ranks);
  m.compute_s = e.compute_s();
  return m;
}

namespace {
// The accuracy column of the candidates' lines.
std::string accuracy_text(const AutoCandidate& k) {
  if (k.lossless()) return "exact";
  const std::string fidelity =
      k.verdict
          ? fmt::format("fidelity {} (drift {:.3f})", risk_name(k.verdict->risk), k.fidelity->drift)
          : "";
  if (k.measured) return k.measured->delta_text() + (fidelity.empty() ? "" : "; " + fidelity);
  return fidelity.empty() ? "unmeasured" : fidelity;
}
}  // namespace

std::string describe_decision(const AutoDecision& d, const AutoMeasurements& m, size_t top) {
  std::string o = fmt::format(
      "auto: measured {} (link {:.3g} GB/s, alpha {:.1f} us; step compute {}){}\n", m.source,
      m.link.bytes_per_s / 1e9, m.link.alpha_s * 1e6, format_seconds(m.compute_s),
      m.cost_s > 0 ? fmt::format(", measuring took {:.2f} s", m.cost_s) : "");
  o += fmt::format("auto: chose {}\n", d.chosen.label());
  o += fmt::format("auto: why: {}\n", d.reason);
  if (d.runner_up)
    o += fmt::format("auto: runner-up {} at {:.0f} samples/s\n", d.runner_up->label(),
                     d.runner_up->estimate.samples_per_s);
  o += "auto: candidates (predicted samples/s, step, exposed communication, accuracy):\n";
  size_t shown = 0;
  for (const auto& k : d.candidates) {
    if (shown++ >= top) break;
    o += fmt::format("  {:<40} {:>9.0f} {:>9} {:>9}  {}{}\n", k.label(), k.estimate.samples_per_s,
                     format_seconds(k.estimate.step_s), format_seconds(k.estimate.comm_exposed_s),
                     accuracy_text(k), k.excluded.empty() ? "" : " (excluded: " + k.excluded + ")");
  }
  if (d.candidates.size() > top) o += fmt::format("  ... {} more\n", d.candidates.size() - top);
  return o;
}

nlohmann::json decision_json(const AutoDecision& d, const AutoMeasurements& m) {
  const auto cand = candidate_json;
  nlohmann::json j = {{"chosen", cand(d.chosen)},
                      {"reason", d.reason},
                      {"fp32_predicted_samples_per_s", d.fp32_samples_per_s},
                      {"measured",
                       {{"source", m.source},
                        {"link_bytes_per_s", m.link.bytes_per_s},
                        {"link_alpha_s", m.link.alpha_s},
                        {"compute_s", m.compute_s},
                        {"forward_s", m.forward_s},
                        {"cost_s", m.cost_s}}}};
  j["runner_up"] = d.runner_up ? cand(*d.runner_up) : nlohmann::json(nullptr);
  j["candidates"] = nlohmann::json::array();
  for (const auto& k : d.candidates) j["candidates"].push_back(cand(k));
  if (!m.fidelity_pending.empty()) j["fidelity_pending"] = m.fidelity_pending;
  return j;
}

}  // namespace loom::perf
