#include "loom/perf/advisor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "loom/core/error.h"
#include "loom/perf/compute_model.h"
#include "loom/perf/validation_set.h"

namespace loom::perf {

std::string AdviseOption::label() const {
  if (nodes == 1) return fmt::format("{} x {} ({})", gpus, gpu, intra);
  return fmt::format("{} x {} ({} nodes, {} / {})", gpus, gpu, nodes, intra, inter);
}

namespace {

// Candidate syncs, simplest first: a codec is chosen only if it beats the simpler ones by
// more than 5% (Agarwal et al., MLSys 2022: compression rarely beats tuned fp16/fp32). The
// exchange is loom's bucketed allreduce, whose buckets (megabytes) its Communicator sends by
// ring (comm/algorithms.h; halving-doubling only for small buffers); loom has no hierarchical
// allreduce.
std::vector<SyncSpec> candidate_syncs(const std::vector<std::string>& codecs) {
  std::vector<SyncSpec> out;
  for (const auto& codec : codecs) {
    SyncSpec s;
    s.algorithm = "ring";
    s.codec = codec;
    out.push_back(s);
  }
  return out;
}

}  // namespace

Advice advise(const Catalog& cat, const AdviseRequest& req_in) {
  AdviseRequest req = req_in;
  Advice adv;
  if (req.train.precision != "fp32") {
    adv.notes.push_back(fmt::format(
        "--precision {}: loom trains in fp32 only, so every configuration is ranked at fp32",
        req.train.precision));
    req.train.precision = "fp32";
  }
  if (!(req.budget_usd > 0))
    throw InputError(fmt::format("budget must be > 0 USD, got {}", req.budget_usd));
  if (req.max_gpus < 1)
    throw InputError(fmt::format("--max-gpus must be >= 1, got {}", req.max_gpus));
  for (const auto& l : req.inter_links) cat.link(l);  // unknown names: error with close matches
  for (const auto& c : req.codecs) codec_model(c);
  {
    const ValidationRun v = run_validation(true);
    adv.band = v.loo.max_abs;
    adv.typical = v.loo.mean_abs;
  }
  std::vector<const GpuSpec*> gpus;
  auto measured = [&](const GpuSpec& g) { return req.measured.count(g.name) != 0; };
  if (req.gpus.empty()) {
    for (const auto& [n, g] : cat.gpus())
      if (g.has_price() || measured(g)) gpus.push_back(&g);
  } else {
    for (const auto& n : req.gpus) {
      const GpuSpec& g = cat.gpu(n);
      if (!g.has_price() && !measured(g))
        throw InputError(fmt::format(
            "GPU '{}' has no price in the catalog; add price_usd in a --catalog file", n));
      gpus.push_back(&g);
    }
  }
  double cheapest = std::numeric_limits<double>::infinity();
  std::string cheapest_name;
  double cheapest_host = 0;
  // One machine with `g`: its price and how many workers it holds.
  auto node_usd = [&](const GpuSpec& g) {
    return measured(g) && req.measured_node_usd > 0 ? req.measured_node_usd : req.node_usd;
  };
  auto per_node = [&](const GpuSpec& g) {
    if (!measured(g)) return req.gpus_per_node;
    const HostRates& h = req.measured.at(g.name).host;
    return h.valid() ? std::max(1, std::min(req.gpus_per_node, h.cores)) : req.gpus_per_node;
  };
  for (const GpuSpec* g : gpus) {
    double one = g->price_usd + node_usd(*g);
    if (one < cheapest) cheapest = one, cheapest_name = g->name, cheapest_host = node_usd(*g);
  }
  if (gpus.empty()) throw InputError("no GPU in the catalog has a price");
  if (cheapest > req.budget_usd)
    throw InputError(
        fmt::format("a budget of ${:.0f} buys nothing: the cheapest machine is one {} (${:.0f}) in "
                    "a ${:.0f} host",
                    req.budget_usd, cheapest_name, cheapest - cheapest_host, cheapest_host));

  for (const GpuSpec* g : gpus) {
    bool fits_once = false;
    double need_gb = 0;
    for (int n = 1; n <= req.max_gpus; n *= 2) {
      int k = std::min(n, per_node(*g));
      int nodes = (n + k - 1) / k;
      double cost = n * g->price_usd + nodes * node_usd(*g);
      if (cost > req.budget_usd) break;
      std::vector<std::string> inters = nodes > 1 ? req.inter_links : std::vector<std::string>{"-"};
      for (const auto& inter : inters) {
        Cluster c;
        c.gpu = *g;
        c.topo.nodes = nodes;
        c.topo.gpus_per_node = k;
        c.topo.intra = cat.intra_link_of(*g);
        c.topo.inter = inter == "-" ? c.topo.intra : cat.link(inter);
        c.storage = cat.storage(req.storage);
        AdviseOption best;
        bool have = false;
        Derating d;
        if (measured(*g)) {
          d = req.measured.at(g->name);
        } else {
          // A published rate of this GPU (or its chip) where there is one, else the roofline.
          const ComputeRate rate =
              compute_rate(cat, *g, req.workload, req.train.precision, double(req.train.batch));
          if (rate.method == "roofline")
            d.compute = rate.efficiency;
          else
            d.sample_s = rate.sample_s;
        }
        for (const SyncSpec& s : candidate_syncs(req.codecs)) {
          CostModel m(req.workload, c, s, req.train, d);
          StepEstimate e = m.estimate();
          if (!e.fits) {
            need_gb = e.memory.total() / 1e9;
            break;  // memory does not depend much on the codec: the GPU is out
          }
          fits_once = true;
          if (!have || e.samples_per_s > 1.05 * best.est.samples_per_s) {
            best = {g->name, n, nodes, c.topo.intra.name, inter, cost, g->memory_gb, s, e};
            have = true;
          }
        }
        if (have) adv.ranked.push_back(best);
      }
    }
    if (!fits_once && need_gb > 0)
      adv.not_fitting.push_back(
          fmt::format("{} ({:.0f} GB): needs {:.1f} GB", g->name, g->memory_gb, need_gb));
  }
  if (adv.ranked.empty())
    throw InputError(
        fmt::format("nothing the budget of ${:.0f} buys fits {} at batch {} per GPU: {}",
                    req.budget_usd, req.workload.name, req.train.batch,
                    adv.not_fitting.empty() ? std::string("no configuration")
                                            : fmt::format("{}", fmt::join(adv.not_fitting, "; "))));
  std::stable_sort(adv.ranked.begin(), adv.ranked.end(),
                   [](const AdviseOption& a, const AdviseOption& b) {
                     if (a.est.samples_per_s != b.est.samples_per_s)
                       return a.est.samples_per_s > b.est.samples_per_s;
                     return a.cost_usd < b.cost_usd;
                   });
  const AdviseOption& top = adv.ranked.front();
  adv.host_ram_gb_per_node = cat.gpu(top.gpu).memory_gb * std::min(top.gpus, req.gpus_per_node);
  return adv;
}

void use_calibration(const Calibration& cal, Catalog& cat, AdviseRequest& req, double machine_usd) {
  Derating d;
  cal.apply(cat, d);
  if (!cat.gpus().count("this-machine"))
    throw InputError(fmt::format(
        "{}: no gemm and membw lines, so no device 'this-machine' to advise on (write the file "
        "with `loom bench calibrate`)",
        cal.file));
  if (machine_usd < 0)
    throw InputError(fmt::format("--machine-usd must be >= 0, got {}", machine_usd));
  req.measured["this-machine"] = d;
  req.measured_node_usd = machine_usd;
}

std::string advice_report(const Advice& a, const AdviseRequest& req, size_t n) {
  std::string o = fmt::format(
      "{}: {:.1f}M params, {:.2f} GFLOP/sample forward, batch {}/GPU, fp32; budget ${:.0f} (host "
      "${:.0f} per machine)\n",
      req.workload.name, req.workload.params() / 1e6, req.workload.fwd_flops() / 1e9,
      req.train.batch, req.budget_usd, req.node_usd);
  for (const auto& note : a.notes) o += fmt::format("Note: {}\n", note);
  o += fmt::format(
      "samples/s: the prediction and, in brackets, the band of the model's leave-one-out error "
      "on published results (+-{:.0f}% at most, {:.0f}% on average; docs/perf.md)\n\n",
      100 * a.band, 100 * a.typical);
  o += fmt::format("{:>3}  {:<44} {:>9} {:>22} {:>10} {:>6} {:>9}  {:<14} {}\n", "#",
                   "configuration", "cost $", "samples/s", "per $1k", "eff", "memory", "sync",
                   "dominant term");
  const double lo_top = a.ranked.empty() ? 0 : a.ranked.front().est.samples_per_s * (1 - a.band);
  int ties = 0;
  for (size_t i = 0; i < std::min(n, a.ranked.size()); ++i) {
    const AdviseOption& r = a.ranked[i];
    const double sps = r.est.samples_per_s;
    if (i > 0 && sps * (1 + a.band) >= lo_top) ++ties;
    o += fmt::format(
        "{:>3}  {:<44} {:>9.0f} {:>8.1f} ({:>5.0f}-{:<5.0f}) {:>10.1f} {:>5.0f}% "
        "{:>6.1f} GB  {:<14} {}\n",
        i + 1, r.label(), r.cost_usd, sps, sps * (1 - a.band), sps * (1 + a.band),
        r.samples_per_kusd(), 100 * r.est.efficiency, r.est.memory.total() / 1e9,
        fmt::format("{} {}", r.sync.algorithm, r.sync.codec), r.est.dominant());
  }
  if (ties > 0)
    o += fmt::format(
        "\n{} of the options below #1 overlap its band: the model cannot rank them apart; "
        "choose among them by price or memory.\n",
        ties);
  o += "\nWhy:\n";
  for (size_t i = 0; i < std::min<size_t>(3, a.ranked.size()); ++i) {
    const AdviseOption& r = a.ranked[i];
    const StepEstimate& e = r.est;
    std::string what;
    const std::string parts = fmt::format(
        "step {} = compute {} + exposed communication {} + waiting for the slowest worker {} + "
        "input {}",
        format_seconds(e.step_s), format_seconds(e.compute_s()), format_seconds(e.comm_exposed_s),
        format_seconds(e.straggler_s + e.overhead_s), format_seconds(e.input_exposed_s));
    if (e.dominant() == "exposed communication")
      what = fmt::format("the link dominates: {} of communication the backward pass cannot hide",
                         format_seconds(e.comm_exposed_s));
    else if (e.dominant() == "input")
      what = fmt::format("input dominates: storage needs {} per step", format_seconds(e.input_s));
    else if (e.limiter == "memory bandwidth")
      what = "compute dominates, bound by GPU memory bandwidth";
    else
      what = fmt::format("compute dominates (communication {} hidden behind backward)",
                         e.comm_exposed_s < 0.05 * e.step_s ? "mostly" : "partly");
    o += fmt::format(
        "{}. {}: {:.0f} samples/s for ${:.0f}; {}; {}; {:.1f} of {:.0f} GB used; loom: sync "
        "allreduce ({}) with codec {}.\n",
        i + 1, r.label(), e.samples_per_s, r.cost_usd, what, parts, e.memory.total() / 1e9,
        r.gpu_memory_gb, r.sync.algorithm, r.sync.codec);
  }
  if (!a.not_fitting.empty())
    o += fmt::format("\nNot considered (model does not fit): {}\n", fmt::join(a.not_fitting, "; "));
  o += fmt::format("Host RAM: at least {:.0f} GB per machine (as much as the GPU memory in it).\n",
                   a.host_ram_gb_per_node);
  return o;
}

}  // namespace loom::perf
