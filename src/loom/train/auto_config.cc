#include "loom/train/auto_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <span>

#include "loom/compress/registry.h"
#include "loom/core/error.h"
#include "loom/core/log.h"
#include "loom/measure/auto_probe.h"
#include "loom/measure/machine_identity.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/optim/optimizer.h"
#include "loom/perf/calibration.h"
#include "loom/plan/auto_reader.h"
#include "loom/sync/allreduce/buckets.h"
#include "loom/sync/allreduce/overlap_policy.h"
#include "loom/train/checkpoint.h"

namespace loom::train {
namespace {

// What auto does not weigh, and why: one line of the log, from the codecs' records and the
// parameter server's reason.
std::string not_candidates_line() {
  std::vector<std::string> why;
  for (const compress::CodecKind* k : compress::codec_kinds())
    if (!k->auto_candidate)
      why.push_back(k->not_auto_reason.empty() ? "codec " + k->name : k->not_auto_reason);
  why.push_back(
      "sync = \"ps\" (the parameter server: servers change which ranks train, and no accuracy "
      "delta is recorded for it)");
  return fmt::format("auto: not candidates: {}\n", fmt::join(why, ", "));
}

const std::vector<int64_t> kAutoBucketKib = {1024, 4096, 16384};

// What the accuracy table matches a run on (perf::NetworkKey). The family is the built-in model
// or zoo graph the run names, whatever its widths; a graph of the user's own (inline layers, a
// graph or ONNX file) has none, and only its fidelity can speak for a lossy codec.
perf::NetworkKey network_key(const plan::RunPlan& run, int workers, bool token_run) {
  perf::NetworkKey k;
  const std::string& m = run.model.model;
  const bool own_graph =
      !run.model.inline_graph.layers.empty() || m.find_first_of("./\\") != std::string::npos;
  k.family = own_graph ? "" : m;
  const optim::OptimizerOptions& o = run.optimizer;
  if (o.name == "sgd")
    k.optimizer = o.momentum > 0 ? "sgd_momentum" : "sgd";
  else if (o.name == "adam")
    k.optimizer = o.decoupled ? "adamw" : "adam";
  else
    k.optimizer = o.name;
  k.workers = workers;
  k.metric = token_run ? perf::AccuracyMetric::kBits : perf::AccuracyMetric::kPoints;
  return k;
}

// The step's buckets as the cost model walks them: each layer's parameters, in forward order.
perf::Workload workload_of(const nn::Model& model, const std::string& name) {
  perf::Workload w;
  w.name = name;
  for (const auto& r : model.param_ranges()) {
    perf::LayerCost c;
    c.name = model.layer_name(r.layer);
    c.params = double(r.count);
    c.fwd_flops = 2.0 * double(r.count);  // per sample: a multiply-add per weight
    w.layers.push_back(c);
  }
  return w;
}

}  // namespace

std::vector<std::string> auto_candidate_codecs() {
  return compress::codec_names_where([](const compress::CodecKind& k) { return k.auto_candidate; });
}

// A resume keeps the choice its checkpoint recorded (the config text saved with it) when it runs
// where that choice was made: the strategy's saved state belongs to that choice. True when it
// did (res then holds it); false when there is nothing to keep and auto decides anew.
bool keep_resumed_choice(const plan::RunPlan& run, const std::string& machine, bool lead,
                         AutoResolution& res) {
  const std::string& resume = run.guard.resume;
  if (resume.empty()) return false;
  const std::string dir = find_latest_checkpoint(resume);
  const plan::SyncChoice saved =
      plan::saved_sync_choice(checkpoint_config_text(dir), dir + " (config)");
  if (saved.machine == machine) {
    nlohmann::json chosen;
    plan::SyncChoice kept;
    if (res.codec_auto) chosen["codec"] = *(kept.codec = saved.codec);
    if (res.sync_auto) chosen["sync"] = *(kept.sync = saved.sync);
    if (res.bucket_auto) chosen["bucket_kib"] = *(kept.bucket_kib = saved.bucket_kib);
    kept.machine = machine;
    // A choice the check switched to says so in the resumed run's config and summary too.
    kept.revised = saved.revised;
    if (!saved.revised.empty()) chosen["revised"] = saved.revised;
    res.choice = kept;
    res.choice_where = dir;
    res.kept_from = dir;
    res.json = nlohmann::json{{"chosen", chosen}, {"kept_from_checkpoint", dir}}.dump();
    res.log =
        fmt::format("auto: kept the choice of {} ({}), made on this machine\n", dir, chosen.dump());
    return true;
  }
  if (lead)
    log_warn("auto: {} was decided {}; deciding again here ({})", dir,
             saved.machine.empty() ? "without a machine record" : "on " + saved.machine, machine);
  return false;
}

// The rates auto weighs: from auto.calibration when it was measured on this machine (its
// identity and auto.calibration_mismatch decide), else measured now on `probe`, a copy of the
// model, with the run's communicator.
perf::AutoMeasurements measure_for_auto(const plan::AutoOptions& ao, comm::Communicator& comm,
                                        nn::Model& probe, const perf::AutoRequest& r, int threads,
                                        bool lead) {
  perf::AutoMeasurements measured;
  bool measured_here = true;
  const std::string& cal_file = ao.calibration;
  if (!cal_file.empty()) {
    const perf::Calibration cal = perf::read_calibration(cal_file);
    const perf::MachineIdentity here{measure::cpu_model(), comm.name(), comm.size()};
    std::string warning;
    const perf::MismatchPolicy policy = ao.calibration_mismatch;
    if (perf::accept_calibration(cal, here, policy, &warning)) {
      measured = perf::measurements_from_calibration(cal, comm.name(), r, threads);
      measured_here = false;
    } else if (lead) {
      log_warn("{}", warning);
    }
  }
  if (measured_here) {
    measure::AutoProbeOptions o;
    o.batch = r.batch;
    o.codecs = r.codecs;
    // Two sizes fit the ring's alpha and bandwidth: 64 KiB and the largest bucket the run
    // can send, the model's whole gradient at most and 4 MiB (the default bucket) at most:
    // on a slow link a larger one costs more of the run than it adds to the fit, whose time
    // grows linearly in the bytes past the latency. Every candidate is predicted from the fit.
    const int64_t whole = probe.num_params() * int64_t(sizeof(float));
    int64_t largest = 0;
    for (int64_t kib : r.bucket_kib) largest = std::max(largest, kib > 0 ? kib << 10 : whole);
    o.allreduce_bytes = {size_t(std::min<int64_t>(64 << 10, whole)),
                         size_t(std::min({largest, whole, int64_t(4) << 20}))};
    measured = measure::probe_for_auto(comm, probe, o);
  }
  return measured;
}

AutoResolution resolve_auto(const plan::RunPlan& run, comm::Communicator& comm, Backend& backend,
                            const nn::Shape& input, int classes, int64_t total_steps,
                            bool token_run) {
  AutoResolution res;
  if (!run.wants_auto()) return res;
  res.active = true;
  const bool lead = comm.rank() == 0;
  if (run.parallel_mode != "data")
    throw ConfigError(fmt::format(
        "{}: codec/sync = \"auto\" chooses for data parallelism; set them with parallel = "
        "\"{}\"",
        run.parallel_where, run.parallel_mode));

  res.codec_auto = run.codec_auto;
  res.sync_auto = run.sync_auto;
  res.bucket_auto = run.bucket_auto;
  const std::string machine =
      fmt::format("{} | {} | {} ranks", measure::cpu_model(), comm.name(), comm.size());
  // A resume keeps the choice its checkpoint recorded (the config text saved with it) when it
  // runs where that choice was made: the strategy's saved state belongs to that choice.
  if (keep_resumed_choice(run, machine, lead, res)) return res;

  // One worker exchanges nothing: there is nothing to measure or weigh.
  if (comm.size() == 1) {
    plan::SyncChoice one;
    if (res.codec_auto) one.codec = "fp32";
    if (res.sync_auto) one.sync = "allreduce";
    if (res.bucket_auto) one.bucket_kib = 4096;
    one.machine = machine;
    res.choice = one;
    res.choice_where = "auto (one worker)";
    res.json = nlohmann::json{{"chosen",
                               {{"codec", res.codec_auto ? *one.codec : run.codec},
                                {"sync", res.sync_auto ? *one.sync : run.sync_kind}}},
                              {"reason", "one worker exchanges nothing"}}
                   .dump();
    res.log = "auto: one worker exchanges nothing: no codec or strategy to choose\n";
    return res;
  }

  perf::AutoRequest r;
  r.codecs = res.codec_auto ? auto_candidate_codecs() : std::vector<std::string>{run.codec};
  if (res.sync_auto) {
    r.syncs = {"allreduce", "bmuf"};
  } else {
    if (run.sync_kind == "ps")
      throw ConfigError(fmt::format(
          "{}: codec/sync.bucket_kib = \"auto\" choose for sync = \"allreduce\" or \"bmuf\", "
          "not \"ps\"",
          run.sync_where));
    r.syncs = {run.sync_kind};
  }
  r.bucket_kib = res.bucket_auto ? kAutoBucketKib : std::vector<int64_t>{run.bucket_kib};
  r.bmuf_tau = int(run.bmuf_tau);
  const plan::AutoOptions& ao = run.auto_options;
  r.lossy = ao.lossy;
  r.max_accuracy_delta = ao.max_accuracy_delta;
  r.ranks = comm.size();
  r.batch = run.settings.batch;
  r.total_steps = total_steps;
  r.overlap = plan::overlap(run, comm);

  // A probe copy of the model: the run's own model stays as initialised.
  nn::Model probe(backend, input, classes, nn::build_model_nodes(run.model, input, classes));
  nn::apply_loss_options(run.loss, probe);
  r.workload = workload_of(probe, run.model.model);
  // Block momentum cannot clip the combined gradient nor carry BatchNorm's synced statistics
  // (plan/strategy_factory.cc refuses both): sync = "auto" then keeps to the allreduce.
  if (r.syncs.size() > 1 && (run.clip_norm > 0.0f || probe.reduces_across_replicas()))
    r.syncs = {"allreduce"};
  r.network = network_key(run, comm.size(), token_run);
  r.max_bits_delta = ao.max_bits_delta;

  // A calibration file of this machine, or a measurement now.
  res.measured = measure_for_auto(ao, comm, probe, r, int(run.settings.threads), lead);
  // The test hook auto.test_probe_link_factor: a known first choice for the tests.
  if (ao.test_probe_link_factor != 1) {
    res.measured.link.bytes_per_s *= ao.test_probe_link_factor;
    res.measured.link.alpha_s /= ao.test_probe_link_factor;
    res.measured.source +=
        fmt::format(" (test hook: link read {}x faster)", ao.test_probe_link_factor);
  }
  // The lossy codecs through the allreduce wait for their fidelity on the run's first steps,
  // which the check replays (make_fidelity_probe).
  const bool any_lossy_codec = std::any_of(r.codecs.begin(), r.codecs.end(),
                                           [](const std::string& c) { return c != "fp32"; });
  if (any_lossy_codec && r.lossy != perf::LossyPolicy::kNever && ao.check_steps > 0 &&
      std::count(r.syncs.begin(), r.syncs.end(), "allreduce") > 0)
    res.measured.fidelity_pending = fmt::format(
        "measured on the gradients of the run's first {} steps, and auto decides again then "
        "(auto.check_after + auto.check_steps)",
        ao.check_after + ao.check_steps);
  res.decision = perf::decide_auto(r, res.measured, perf::builtin_accuracy_table());
  res.request = r;
  res.decided = true;

  const perf::AutoCandidate& c = res.decision.chosen;
  plan::SyncChoice chosen;
  if (res.codec_auto) chosen.codec = c.codec;
  if (res.sync_auto) chosen.sync = c.sync;
  if (res.bucket_auto) chosen.bucket_kib = c.bucket_kib;
  chosen.machine = machine;
  res.choice = chosen;
  res.choice_where = "auto (measured)";

  nlohmann::json j = perf::decision_json(res.decision, res.measured);
  // The measuring's share of a 1,000-step run at the chosen configuration's predicted step.
  const double share = res.measured.cost_s / (1000 * c.estimate.step_s);
  j["measured"]["cost_share_of_1000_steps"] = share;
  res.json = j.dump();
  res.log = perf::describe_decision(res.decision, res.measured);
  if (res.codec_auto || res.sync_auto) res.log += not_candidates_line();
  if (res.measured.cost_s > 0)
    res.log += fmt::format(
        "auto: measuring cost {:.2f} s, {:.1f}% of a 1,000-step run at the predicted step\n",
        res.measured.cost_s, 100 * share);
  return res;
}

nlohmann::json auto_summary(const std::string& decision_json, double measured_samples_per_s) {
  nlohmann::json j = nlohmann::json::parse(decision_json);
  const bool switched = j.contains("revision") && j["revision"].value("outcome", "") == "switched";
  const nlohmann::json& ran = switched ? j["revision"]["after"] : j["chosen"];
  const double predicted = ran.value("predicted_samples_per_s", 0.0);
  if (measured_samples_per_s > 0 && predicted > 0) {
    const double error = predicted / measured_samples_per_s - 1;
    j["check"] = {
        {"measured_samples_per_s", measured_samples_per_s},
        {"predicted_samples_per_s", predicted},
        {"prediction", switched ? "the switched choice, corrected figures" : "the start-up choice"},
        {"error", error},
        {"within_model_error", std::abs(error) <= perf::kModelValidatedError}};
  }
  return j;
}

AutoCheckWindow auto_check_window(const plan::AutoOptions& o, const AutoResolution& res,
                                  int64_t start_step, int64_t total_steps) {
  AutoCheckWindow w;
  const int64_t after = o.check_after;
  int64_t steps = o.check_steps;
  if (!res.active) return w;
  if (!res.decided) {
    w.skipped = !res.kept_from.empty()
                    ? fmt::format("the choice was kept from {}; the run that made it checked it",
                                  res.kept_from)
                    : "one worker exchanges nothing";
    return w;
  }
  if (steps == 0) {
    w.skipped = "auto.check_steps = 0";
    return w;
  }
  // Block momentum exchanges once a block: the window holds whole blocks, so that its mean
  // step carries the exchange's share.
  const perf::AutoCandidate& c = res.decision.chosen;
  if (c.sync == "bmuf" && c.tau > 1) steps = (steps + c.tau - 1) / c.tau * c.tau;
  w.first = start_step + after;
  // A switch needs steps after the window to pay for itself.
  if (w.first + steps >= total_steps) {
    w.skipped = fmt::format(
        "the run ends at step {}, before a check window of steps {}-{} could be followed by "
        "another step",
        total_steps, w.first, w.first + steps - 1);
    return w;
  }
  w.steps = steps;
  return w;
}

void gather_optimizer_state(comm::Communicator& comm, Backend& backend, optim::Optimizer& optimizer,
                            const std::vector<std::pair<int64_t, int64_t>>& owned) {
  if (owned.empty() || comm.size() == 1) return;
  for (const optim::StateBuffer& b : optimizer.state()) {
    std::vector<float> all(size_t(b.size));
    if (b.size > 0) backend.copy_to_host(all.data(), b.data, all.size() * sizeof(float));
    std::vector<float> mine(all.size(), 0.0f);
    for (const auto& [offset, count] : owned) {
      LOOM_CHECK(offset >= 0 && count >= 0 && offset + count <= b.size,
                 "owned elements [{}, {}) outside optimizer buffer {} of {}", offset,
                 offset + count, b.name, b.size);
      std::copy(all.begin() + offset, all.begin() + offset + count, mine.begin() + offset);
    }
    comm.allreduce(std::span<float>(mine));
    if (b.size > 0) backend.copy_to_device(b.data, mine.data(), mine.size() * sizeof(float));
  }
}

plan::SyncChoice revision_choice(const AutoResolution& res, const perf::AutoRevision& v,
                                 int64_t step) {
  plan::SyncChoice choice;
  if (!v.switched()) return choice;
  const perf::AutoCandidate& c = v.after;
  if (res.codec_auto) choice.codec = c.codec;
  if (res.sync_auto) choice.sync = c.sync;
  if (res.bucket_auto) choice.bucket_kib = c.bucket_kib;
  choice.revised = fmt::format("{} -> {} at step {}", v.before.label(), c.label(), step);
  return choice;
}

std::unique_ptr<measure::FidelityProbe> make_fidelity_probe(const AutoResolution& res,
                                                            const plan::RunPlan& run,
                                                            const AutoCheckWindow& window,
                                                            nn::Model& model, Backend& backend) {
  if (!res.decided || res.measured.fidelity_pending.empty() || !window.active()) return nullptr;
  std::vector<compress::CodecOptions> codecs;
  for (const compress::CodecOptions& o : run.auto_options.codec_options)
    if (o.name != "fp32" &&
        std::count(res.request.codecs.begin(), res.request.codecs.end(), o.name) > 0)
      codecs.push_back(o);
  if (codecs.empty()) return nullptr;
  std::vector<measure::FidelitySegment> segments;
  for (const nn::ParamRange& r : model.param_ranges())
    segments.push_back({r.offset, r.count, sync::bucket_matrices(model, {r.offset, r.count, 1})});
  std::vector<float> params(size_t(model.num_params()));
  if (!params.empty())
    backend.copy_to_host(params.data(), model.params(), params.size() * sizeof(float));
  return std::make_unique<measure::FidelityProbe>(codecs, run.optimizer, params, segments);
}

std::vector<perf::CodecFidelity> gather_fidelity(comm::Communicator& comm,
                                                 const measure::FidelityProbe& probe) {
  std::vector<perf::CodecFidelity> f = probe.figures();
  std::vector<double> sums;
  for (const auto& c : f)
    sums.insert(sums.end(), {c.update_cosine, c.drift, c.residual, c.residual_growth});
  if (comm.size() > 1 && !sums.empty()) {
    comm.allreduce(sums.data(), sums.size() * sizeof(double), comm::sum_f64());
    comm.broadcast(sums.data(), sums.size() * sizeof(double), 0);
  }
  const double n = double(comm.size());
  for (size_t i = 0; i < f.size(); ++i) {
    f[i].update_cosine = sums[4 * i] / n;
    f[i].drift = sums[4 * i + 1] / n;
    f[i].residual = sums[4 * i + 2] / n;
    f[i].residual_growth = sums[4 * i + 3] / n;
  }
  return f;
}

}  // namespace loom::train
