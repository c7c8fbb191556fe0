#include "loom/perf/advisor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>
#include <utility>

#include "loom/core/error.h"
#include "loom/perf/compute_model.h"
#include "loom/perf/framework_term.h"
#include "loom/perf/host_fit.h"
#include "loom/perf/validation_set.h"

namespace loom::perf {

double AdviseOption::samples_per_kusd() const {
  return capital_usd > 0 ? est.samples_per_s / (capital_usd / 1000) : 0;
}

double AdviseOption::samples_per_usd(double hours) const {
  const double total = total_usd();
  return total > 0 ? est.samples_per_s * 3600 * hours / total : 0;
}

std::string AdviseOption::label() const {
  if (rented) return fmt::format("{} x {} rented ({})", gpus, gpu, host);
  if (nodes == 1) return fmt::format("{} x {} in {} ({})", gpus, gpu, host, intra);
  return fmt::format("{} x {} in {} x {} ({} / {})", gpus, gpu, nodes, host, intra, inter);
}

namespace {

// Candidate syncs, simplest first: a codec is chosen only if it beats the simpler ones by
// more than 5% (Agarwal et al., MLSys 2022: compression rarely beats tuned fp16/fp32). The
// exchange is loom's bucketed allreduce, whose buckets (megabytes) its Communicator sends by
// ring (comm/algorithms.h; halving-doubling only for small buffers), or, on several machines
// of several GPUs each, by its two-level allreduce (comm.algorithm = "two-level",
// comm::algo::two_level_allreduce; with a codec, sync::two_level_compressed_allreduce: fp32
// inside machines, the codec across them). Two-level is a candidate after the ring with every
// codec but PowerSGD (whose factors stay a flat exchange), and must beat it by 5% too.
std::vector<SyncSpec> candidate_syncs(const std::vector<std::string>& codecs, int nodes,
                                      int gpus_per_node) {
  std::vector<SyncSpec> out;
  for (const auto& codec : codecs) {
    SyncSpec s;
    s.algorithm = "ring";
    s.codec = codec;
    out.push_back(s);
    if (codec != "powersgd" && nodes > 1 && gpus_per_node > 1) {
      s.algorithm = "two-level";
      out.push_back(s);
    }
  }
  return out;
}

// How loom is told to run a sync: the allreduce strategy, its algorithm where it is not the
// default, and the codec.
std::string loom_sync_text(const SyncSpec& s) {
  if (s.algorithm == "two-level")
    return fmt::format("sync allreduce (two-level: comm.algorithm = \"two-level\") with codec {}",
                       s.codec);
  return fmt::format("sync allreduce ({}) with codec {}", s.algorithm, s.codec);
}

// Higher is better: samples/s (time to train), samples/s per capital dollar (rentals: per
// dollar of rent), or samples per dollar of everything over the hours.
double rank_key(const AdviseOption& o, const AdviseRequest& req) {
  if (req.rank_by == "time") return o.est.samples_per_s;
  if (req.rank_by == "capital" && !o.rented) return o.samples_per_kusd();
  return o.samples_per_usd(req.hours);
}

// Best first; of one GPU, count, machine count and link, only the best host class.
void rank(std::vector<AdviseOption>& v, const AdviseRequest& req) {
  std::stable_sort(v.begin(), v.end(), [&](const AdviseOption& a, const AdviseOption& b) {
    const double ka = rank_key(a, req), kb = rank_key(b, req);
    if (ka != kb) return ka > kb;
    return a.total_usd() < b.total_usd();
  });
  std::set<std::tuple<std::string, int, int, std::string, bool>> seen;
  std::vector<AdviseOption> out;
  for (auto& o : v)
    if (seen.insert({o.gpu, o.gpus, o.nodes, o.inter, o.rented}).second) out.push_back(o);
  v = std::move(out);
}

std::string usd(double v) {
  return fmt::format("${:.0f}", v);
}

// The request's figures in their ranges, and every name it gives known (InputError with close
// matches otherwise).
void check_request(const Catalog& cat, const AdviseRequest& req) {
  if (!(req.budget_usd > 0))
    throw InputError(fmt::format("budget must be > 0 USD, got {}", req.budget_usd));
  if (req.max_gpus < 1)
    throw InputError(fmt::format("--max-gpus must be >= 1, got {}", req.max_gpus));
  if (req.gpus_per_node < 1)
    throw InputError(fmt::format("--gpus-per-node must be >= 1, got {}", req.gpus_per_node));
  if (!(req.hours > 0)) throw InputError(fmt::format("--hours must be > 0, got {}", req.hours));
  if (!(req.usd_per_kwh >= 0))
    throw InputError(fmt::format("--usd-per-kwh must be >= 0, got {}", req.usd_per_kwh));
  if (!(req.gpu_utilisation > 0 && req.gpu_utilisation <= 1))
    throw InputError(
        fmt::format("--gpu-utilisation must be in (0, 1], got {}", req.gpu_utilisation));
  if (!(req.samples >= 0))
    throw InputError(fmt::format("--samples must be >= 0, got {}", req.samples));
  if (req.rank_by != "time" && req.rank_by != "capital" && req.rank_by != "total")
    throw InputError(
        fmt::format("--rank-by must be time, capital or total, got '{}'", req.rank_by));
  for (const auto& l : req.inter_links) cat.link(l);  // unknown names: error with close matches
  for (const auto& c : req.codecs) codec_model(c);
}

// The GPUs to rank: those named, or every GPU with a price (or measured here); a named GPU
// without either is an InputError. Those loom has no backend for go to `no_backend`.
std::vector<const GpuSpec*> gpus_to_consider(const Catalog& cat, const AdviseRequest& req,
                                             std::vector<std::string>& no_backend) {
  auto measured = [&](const GpuSpec& g) { return req.measured.count(g.name) != 0; };
  std::vector<const GpuSpec*> gpus;
  if (req.gpus.empty()) {
    for (const auto& [n, g] : cat.gpus())
      if (g.has_price() || measured(g)) gpus.push_back(&g);
  } else {
    for (const auto& n : req.gpus) {
      const GpuSpec& g = cat.gpu(n);
      bool rentable = false;
      for (const auto& [cn, c] : cat.clouds()) rentable |= c.gpu == n;
      if (!g.has_price() && !measured(g) && !(req.cloud && rentable))
        throw InputError(fmt::format(
            "GPU '{}' has no price in the catalog; add price_usd in a --catalog file", n));
      gpus.push_back(&g);
    }
  }
  if (gpus.empty()) throw InputError("no GPU in the catalog has a price");
  std::erase_if(gpus, [&](const GpuSpec* g) {
    if (g->loom_runs()) return false;
    no_backend.push_back(g->name);
    return true;
  });
  if (gpus.empty())
    throw InputError(fmt::format("loom runs none of these GPUs ({}): its GPU backend is CUDA",
                                 fmt::join(no_backend, ", ")));
  return gpus;
}

// One `advise` call: the request, what it has found so far, and the steps it takes: price the
// machines it can buy (this one, from its measured figures, or a host class of the catalog with
// GPUs in it), price the rentals, then rank what the budget pays or say why nothing fits.
class AdvisorRun {
 public:
  AdvisorRun(const Catalog& cat, const AdviseRequest& req) : cat_(cat), req_(req) {}

  Advice run() {
    if (req_.train.precision == "mixed")
      adv_.notes.push_back(
          "--precision mixed: each GPU is ranked at the faster of fp32 and the lower precision "
          "loom trains in on it: precision = \"bf16\" from compute capability 8.0, \"fp16\" "
          "(dynamic loss scaling) on 7.x; older GPUs have no tensor cores (docs/precision.md)");
    check_request(cat_, req_);
    adv_.band = builtin_validation().loo_throughput.max_abs;
    adv_.typical = builtin_validation().loo_throughput.mean_abs;
    adv_.samples = req_.samples > 0 ? req_.samples : req_.workload.train_samples;
    adv_.samples_source = req_.samples > 0 ? "--samples" : req_.workload.train_samples_source;
    gpus_ = gpus_to_consider(cat_, req_, adv_.no_backend);
    const std::vector<const HostClassSpec*> hosts = host_classes();
    for (const GpuSpec* g : gpus_) {
      if (!g->has_price() && !measured(*g)) continue;  // rentable only
      if (measured(*g))
        price_this_machine(*g);
      else
        price_host_classes(*g, hosts);
    }
    if (req_.cloud) price_rentals();
    return finish();
  }

 private:
  bool measured(const GpuSpec& g) const { return req_.measured.count(g.name) != 0; }

  // The host classes to put GPUs in: those named, or every one of the catalog.
  std::vector<const HostClassSpec*> host_classes() const {
    std::vector<const HostClassSpec*> hosts;
    if (req_.hosts.empty()) {
      for (const auto& [n, h] : cat_.hosts()) hosts.push_back(&h);
    } else {
      for (const auto& n : req_.hosts) hosts.push_back(&cat_.host(n));
    }
    return hosts;
  }

  // A published rate of this GPU (or its chip) at `precision` (fp32 or mixed) where there is
  // one, else the roofline; the measured figures for this machine.
  Derating derating(const GpuSpec& g, const std::string& precision) const {
    Derating d;
    if (measured(g)) return req_.measured.at(g.name);
    const ComputeRate rate =
        compute_rate(cat_, g, req_.workload, precision, double(req_.train.batch), kComputeFit, "",
                     req_.train.layout);
    d.use(rate);
    return d;
  }

  // Predicts `base` on nodes x k GPUs, once per inter-node link, with the best sync for each
  // and, for a mixed request, the better of fp32 and the lower precision loom runs on the GPU
  // (loom_precision): a tensor rate is not always faster than fp32 (GeForce cards accumulate
  // in fp32 at half rate), and fp32, the simpler, is kept unless the other is 5% faster.
  void estimate(const GpuSpec& g, const AdviseOption& base, int k, const LinkSpec& intra, int nics,
                const std::vector<std::string>& inters, std::vector<AdviseOption>& out) {
    // The precisions to try and their compute rates: they depend on the GPU only, not on the
    // machine count or the link.
    std::vector<std::pair<std::string, Derating>> precisions = {{"fp32", derating(g, "fp32")}};
    if (const std::string low = loom_precision(g, req_.train.precision); low != "fp32")
      precisions.emplace_back(low, derating(g, "mixed"));
    TrainSpec at_fp32 = req_.train;
    at_fp32.precision = "fp32";
    for (const auto& inter : inters) {
      Cluster c;
      c.gpu = g;
      c.topo.nodes = base.nodes;
      c.topo.gpus_per_node = k;
      c.topo.intra = intra;
      c.topo.inter = inter == "-" ? intra : cat_.link(inter);
      c.topo.nics_per_node = nics;
      c.storage = cat_.storage(req_.storage);
      AdviseOption best = base;
      best.inter = inter;
      bool have = false;
      for (const auto& [precision, d] : precisions) {
        TrainSpec train = req_.train;
        train.precision = precision;
        for (const SyncSpec& s : candidate_syncs(req_.codecs, base.nodes, k)) {
          StepEstimate e = CostModel(req_.workload, c, s, train, d).estimate();
          if (precision != "fp32") {
            // loom's bf16/fp16 keep fp32 weights, gradients and activations and round each
            // product's inputs: its memory is the fp32 run's, not a framework's with fp16
            // activations.
            const StepEstimate m = CostModel(req_.workload, c, s, at_fp32, d).estimate();
            e.memory = m.memory;
            e.fits = m.fits;
          }
          if (!e.fits) {
            need_gb_[g.name] = e.memory.total() / 1e9;
            return;  // memory does not depend much on the codec: the GPU is out
          }
          fits_once_.insert(g.name);
          if (!have || e.samples_per_s > 1.05 * best.est.samples_per_s) {
            best.sync = s;
            best.est = e;
            best.precision = precision;
            have = true;
          }
        }
      }
      if (have) {
        const PredictionBand b =
            prediction_band(builtin_validation(), g, best.precision, base.nodes * k);
        best.band = b.band;
        best.typical = b.typical;
        best.band_basis = b.basis;
        out.push_back(best);
      }
    }
  }

  void set_energy(AdviseOption& o, double gpu_w, int per_node, double host_w) const {
    o.node_draw_w = per_node * gpu_w + host_w;
    o.avg_w = o.nodes * (per_node * gpu_w * req_.gpu_utilisation + host_w);
    o.kwh = o.avg_w * req_.hours / 1000;
    o.energy_usd = o.kwh * req_.usd_per_kwh;
  }

  AdviseOption option_for(const GpuSpec& g) const {
    AdviseOption base;
    base.gpu = g.name;
    base.gpu_memory_gb = g.memory_gb;
    return base;
  }

  // This machine's CPU: workers cost nothing beyond the machine; as many as it has cores.
  void price_this_machine(const GpuSpec& g) {
    const HostRates& h = req_.measured.at(g.name).host;
    const int per_node =
        h.valid() ? std::max(1, std::min(req_.gpus_per_node, h.cores)) : req_.gpus_per_node;
    const double machine = req_.measured_node_usd;
    if (machine < cheapest_)
      cheapest_ = machine, cheapest_what_ = fmt::format("one more {} for {}", g.name, usd(machine));
    for (int n = 1; n <= req_.max_gpus; n *= 2) {
      AdviseOption o = option_for(g);
      const int k = std::min(n, per_node);
      o.gpus = n;
      o.nodes = (n + k - 1) / k;
      o.host = g.name;
      o.host_kind = "measured";
      o.host_usd = o.capital_usd = o.nodes * machine;
      if (o.capital_usd > req_.budget_usd) break;
      const LinkSpec& intra = cat_.intra_link_of(g);
      o.intra = intra.name;
      o.host_why = "this machine, from its measured figures (--calibration); power not measured";
      estimate(g, o, k, intra, 1, o.nodes > 1 ? req_.inter_links : std::vector<std::string>{"-"},
               bought_);
    }
  }

  // `g` in each host class that carries it, 1, 2, 4, ... GPUs, as many machines as it takes.
  void price_host_classes(const GpuSpec& g, const std::vector<const HostClassSpec*>& hosts) {
    bool carried = false;
    for (const HostClassSpec* h : hosts) {
      const int kmax = max_gpus_in(cat_, *h, g, req_.gpus_per_node);
      if (kmax == 0) continue;
      carried = true;
      for (int n = 1; n <= kmax; n *= 2) {
        if (!fit_host(cat_, *h, g, n).fits) continue;
        const double one = n * g.price_usd + h->price_usd;
        if (one < cheapest_)
          cheapest_ = one,
          cheapest_what_ = fmt::format("{} x {} in a {} for {} ({} GPUs + {} host)", n, g.name,
                                       h->name, usd(one), usd(n * g.price_usd), usd(h->price_usd));
        break;
      }
      for (int n = 1; n <= req_.max_gpus; n *= 2) {
        const int k = std::min(n, kmax);
        const HostFit fit = fit_host(cat_, *h, g, k);
        if (!fit.fits) continue;  // a baseboard of 8 takes no fewer
        AdviseOption o = option_for(g);
        o.gpus = n;
        o.nodes = n / k;
        o.host = h->name;
        o.host_kind = h->kind;
        o.gpu_usd = n * g.price_usd;
        o.host_usd = o.nodes * h->price_usd;
        o.capital_usd = o.gpu_usd + o.host_usd;
        if (o.capital_usd > req_.budget_usd) break;
        o.intra = fit.intra.name;
        o.host_why = fit.why;
        set_energy(o, g.tdp_w, k, h->host_w);
        std::vector<std::string> inters;
        if (o.nodes > 1) {
          for (const auto& l : req_.inter_links)
            if (std::find(h->nics.begin(), h->nics.end(), l) != h->nics.end()) inters.push_back(l);
        } else {
          inters = {"-"};
        }
        estimate(g, o, k, fit.intra, h->nics_per_node, inters, bought_);
      }
    }
    if (!carried) {
      if (g.is_module())
        adv_.no_host.push_back(fmt::format("{}: no host class carries an {} module on {}", g.name,
                                           g.form_factor, g.baseboard));
      else
        adv_.no_host.push_back(
            fmt::format("{}: no host class carries it (slots or power)", g.name));
    }
  }

  // Renting instead: a cloud row's GPUs by the hour, for the hours; the budget pays the rent.
  void price_rentals() {
    for (const auto& [cn, c] : cat_.clouds()) {
      if (!req_.gpus.empty() &&
          std::find(req_.gpus.begin(), req_.gpus.end(), c.gpu) == req_.gpus.end())
        continue;
      const GpuSpec& g = cat_.gpu(c.gpu);
      if (!g.loom_runs()) {
        if (std::find(adv_.no_backend.begin(), adv_.no_backend.end(), g.name) ==
            adv_.no_backend.end())
          adv_.no_backend.push_back(g.name);
        continue;
      }
      if (c.usd_per_gpu_hour < cheapest_hour_)
        cheapest_hour_ = c.usd_per_gpu_hour,
        cheapest_hour_what_ =
            fmt::format("1 x {} ({}) at ${:.2f}/h", c.gpu, cn, c.usd_per_gpu_hour);
      for (int n = 1; n <= std::min(c.gpus_max, req_.max_gpus); n *= 2) {
        AdviseOption o = option_for(g);
        o.gpus = n;
        o.host = cn;
        o.host_kind = "cloud";
        o.rented = true;
        o.rent_usd = c.usd_per_gpu_hour * n * req_.hours;
        if (o.rent_usd > req_.budget_usd) break;
        const LinkSpec& intra = n > 1 ? cat_.intra_link_of(g) : cat_.link(g.host_link);
        o.intra = intra.name;
        o.host_why = fmt::format("${:.2f} per GPU-hour on demand, power included ({}; {})",
                                 c.usd_per_gpu_hour, c.date, c.source);
        estimate(g, o, n, intra, 1, {"-"}, rented_);
      }
    }
  }

  // The GPUs that never fitted, then the ranking, or InputError saying why nothing is left.
  Advice finish() {
    for (const GpuSpec* g : gpus_)
      if (!fits_once_.count(g->name) && need_gb_.count(g->name))
        adv_.not_fitting.push_back(fmt::format("{} ({:.0f} GB): needs {:.1f} GB", g->name,
                                               g->memory_gb, need_gb_[g->name]));
    if (bought_.empty() && rented_.empty()) {
      if (cheapest_ > req_.budget_usd) {
        std::string rent;
        if (std::isfinite(cheapest_hour_))
          rent = fmt::format("; or rent {}: the budget pays {:.0f} h of it", cheapest_hour_what_,
                             req_.budget_usd / cheapest_hour_);
        throw InputError(fmt::format(
            "a budget of ${:.0f} buys no valid machine: the cheapest that holds a GPU is {}{}",
            req_.budget_usd, std::isfinite(cheapest_) ? cheapest_what_ : std::string("none"),
            rent));
      }
      throw InputError(fmt::format(
          "nothing the budget of ${:.0f} buys fits {} at batch {} per GPU: {}", req_.budget_usd,
          req_.workload.name, req_.train.batch,
          adv_.not_fitting.empty() ? std::string("no configuration")
                                   : fmt::format("{}", fmt::join(adv_.not_fitting, "; "))));
    }
    rank(bought_, req_);
    rank(rented_, req_);
    adv_.ranked = std::move(bought_);
    adv_.rented = std::move(rented_);
    if (adv_.rented.empty() && std::isfinite(cheapest_hour_))
      adv_.cheapest_rental = fmt::format(
          "the cheapest rental, {}, costs ${:.0f} for {:.0f} h: the budget pays {:.0f} h of it",
          cheapest_hour_what_, cheapest_hour_ * req_.hours, req_.hours,
          req_.budget_usd / cheapest_hour_);
    return std::move(adv_);
  }

  const Catalog& cat_;
  const AdviseRequest req_;
  Advice adv_;
  std::vector<const GpuSpec*> gpus_;
  std::map<std::string, double> need_gb_;  // by GPU: the memory a configuration needed
  std::set<std::string> fits_once_;        // GPUs with a configuration that fits
  double cheapest_ = std::numeric_limits<double>::infinity();  // the cheapest machine to buy
  std::string cheapest_what_;
  double cheapest_hour_ = std::numeric_limits<double>::infinity();  // the cheapest rental
  std::string cheapest_hour_what_;
  std::vector<AdviseOption> bought_, rented_;
};

}  // namespace

Advice advise(const Catalog& cat, const AdviseRequest& req) {
  return AdvisorRun(cat, req).run();
}

void use_calibration(const Calibration& cal, Catalog& cat, AdviseRequest& req, double machine_usd) {
  Derating d;
  cal.apply(cat, d);
  if (!cat.gpus().count("this-machine"))
    throw InputError(fmt::format(
        "{}: no gemm and membw lines, so no device 'this-machine' to advise on (write the file "
        "with `loom bench calibrate`)",
        cal.file));
  if (!(machine_usd > 0))
    throw InputError(fmt::format(
        "--machine-usd (the price of one more machine like this one) must be > 0, got {}",
        machine_usd));
  req.measured["this-machine"] = d;
  req.measured_node_usd = machine_usd;
}

namespace {

std::string hours_text(double h) {
  if (!std::isfinite(h)) return "-";
  if (h < 48) return fmt::format("{:.1f} h", h);
  if (h < 24 * 365) return fmt::format("{:.1f} d", h / 24);
  return fmt::format("{:.1f} y", h / (24 * 365));
}

// What a buyer must plan for besides the machine.
std::string plan_for(const AdviseOption& r, const Workload& w, const Catalog& cat) {
  std::string o;
  const int per_node = r.gpus / r.nodes;
  if (r.node_draw_w > 0) {
    o += fmt::format("{} per machine at {:.0f} W", circuit_for(r.node_draw_w), r.node_draw_w);
    if (cat.hosts().count(r.host)) o += fmt::format(" (its supply: {})", cat.host(r.host).supply);
    o += fmt::format("; cooling for {:.0f} BTU/h per machine; ", btu_per_hour(r.node_draw_w));
  }
  if (r.nodes > 1)
    o += fmt::format("a {} NIC per machine and a switch for {} machines (not priced); ", r.inter,
                     r.nodes);
  o += fmt::format("host RAM >= {:.0f} GB per machine (the GPU memory in it); ",
                   per_node * r.gpu_memory_gb);
  const double mbs = r.est.samples_per_s / r.nodes * w.input_bytes / 1e6;
  const StorageSpec* enough = nullptr;
  for (const auto& [n, s] : cat.storages())
    if (s.read_mbs >= mbs && n != "this-machine-loader" &&
        (!enough || s.read_mbs < enough->read_mbs))
      enough = &s;
  o += fmt::format("storage reading >= {:.0f} MB/s per machine ({:.0f} samples/s of {:.0f} kB){}",
                   mbs, r.est.samples_per_s / r.nodes, w.input_bytes / 1e3,
                   enough ? fmt::format(": {} or faster", enough->name)
                          : std::string(": faster than any storage in the catalog"));
  return o;
}

void table(std::string& o, const std::vector<AdviseOption>& v, const Advice& a,
           const AdviseRequest& req, size_t n) {
  o += fmt::format("{:>3}  {:<58} {:>9} {:>9} {:>9} {:>22} {:>8} {:>9} {:>8} {:>6}  {:<19} {}\n",
                   "#", "configuration", "capital $", "energy $", "total $", "samples/s", "/s/$1k",
                   "samples/$", "train", "kW", "precision, sync", "dominant term");
  for (size_t i = 0; i < std::min(n, v.size()); ++i) {
    const AdviseOption& r = v[i];
    const double sps = r.est.samples_per_s;
    o += fmt::format(
        "{:>3}  {:<58} {:>9.0f} {:>9.0f} {:>9.0f} {:>8.1f} ({:>5.0f}-{:<5.0f}) {:>8} {:>9.0f} "
        "{:>8} {:>6}  {:<19} {}\n",
        i + 1, r.label(), r.capital_usd, r.energy_usd, r.total_usd(), sps,
        sps * std::max(0.0, 1 - r.band), sps * (1 + r.band),
        r.rented ? std::string("-") : fmt::format("{:.1f}", r.samples_per_kusd()),
        r.samples_per_usd(req.hours), a.samples > 0 ? hours_text(r.hours_to_train(a.samples)) : "-",
        r.node_draw_w > 0 ? fmt::format("{:.1f}", r.nodes * r.node_draw_w / 1000) : "-",
        fmt::format("{} {} {}", r.precision, r.sync.algorithm, r.sync.codec), r.est.dominant());
  }
}

}  // namespace

std::string advice_report(const Advice& a, const AdviseRequest& req, const Catalog& cat, size_t n) {
  static const std::map<std::string, std::string> rank_names = {
      {"time", "time to train (samples/s)"},
      {"capital", "samples/s per $1k of capital"},
      {"total", "samples per dollar of capital and energy"}};
  std::string o = fmt::format(
      "{}: {:.1f}M params, {:.2f} GFLOP/sample forward, batch {}/GPU, fp32; budget ${:.0f} for "
      "machines (or rent over the hours)\n",
      req.workload.name, req.workload.params() / 1e6, req.workload.fwd_flops() / 1e9,
      req.train.batch, req.budget_usd);
  o += fmt::format(
      "Running cost over {:.0f} h (--hours) at ${:.4f}/kWh (--usd-per-kwh), GPUs at {:.0f}% of "
      "TDP on average (--gpu-utilisation); docs/perf.md gives the sources.\n",
      req.hours, req.usd_per_kwh, 100 * req.gpu_utilisation);
  o += a.samples > 0
           ? fmt::format("train: time to train {:.3g} samples ({}).\n", a.samples, a.samples_source)
           : std::string("train: no sample count for this model (give --samples).\n");
  o += fmt::format("Ranked by {} (--rank-by time|capital|total).\n", rank_names.at(req.rank_by));
  for (const auto& note : a.notes) o += fmt::format("Note: {}\n", note);
  o += fmt::format(
      "samples/s: the prediction and, in brackets, the band of the model's leave-one-source-out "
      "error on published throughput of the GPU's generation at its precision (over all GPUs: "
      "+-{:.0f}% at most, {:.0f}% on average; docs/perf.md)\n",
      100 * a.band, 100 * a.typical);
  if (const FrameworkTerm& t = builtin_framework_term(); t.valid())
    o += fmt::format(
        "The software that trains moves a rate too (the framework term, not in the band): {}; a "
        "rate of the slowest software would be x{:.2f} of the prediction, of the fastest "
        "x{:.2f}.\n",
        t.describe(), t.slowest(1), t.fastest(1));
  o += "\n";
  if (a.ranked.empty()) {
    o += "Nothing to buy within the budget fits the model (rentals below).\n";
  } else {
    table(o, a.ranked, a, req, n);
  }
  const double lo_top =
      a.ranked.empty() ? 0 : a.ranked.front().est.samples_per_s * (1 - a.ranked.front().band);
  int ties = 0;
  for (size_t i = 1; i < std::min(n, a.ranked.size()); ++i)
    if (req.rank_by == "time" && a.ranked[i].est.samples_per_s * (1 + a.ranked[i].band) >= lo_top)
      ++ties;
  if (ties > 0)
    o += fmt::format(
        "\n{} of the options below #1 overlap its band: the model cannot rank them apart; "
        "choose among them by price or memory.\n",
        ties);
  o += fmt::format("\nRent instead (cloud, on demand, for {:.0f} h):\n", req.hours);
  if (!a.rented.empty())
    table(o, a.rented, a, req, std::min<size_t>(n, 5));
  else if (!a.cheapest_rental.empty())
    o += fmt::format("  none within the budget: {}.\n", a.cheapest_rental);
  else
    o += "  none: the catalog has no cloud row for these GPUs.\n";
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
        "{}. {}: {:.0f} samples/s; {}; {}; {:.1f} of {:.0f} GB used; loom: {}.\n", i + 1, r.label(),
        e.samples_per_s, what, parts, e.memory.total() / 1e9, r.gpu_memory_gb,
        r.precision == "fp32"
            ? loom_sync_text(r.sync)
            : fmt::format("precision = \"{}\", {}", r.precision, loom_sync_text(r.sync)));
    if (cat.hosts().count(r.host)) {
      const HostClassSpec& h = cat.host(r.host);
      o += fmt::format("   host: {} ({}), {} each ({}, {}); {}.\n", h.name, h.description,
                       usd(h.price_usd), h.price_source, h.price_date, r.host_why);
    } else {
      o += fmt::format("   host: {}.\n", r.host_why);
    }
    o += fmt::format(
        "   cost: {} capital ({} GPUs + {} machines){}.\n", usd(r.capital_usd), usd(r.gpu_usd),
        usd(r.host_usd),
        r.node_draw_w > 0
            ? fmt::format("; draws {:.1f} kW at load, {:.1f} kW on average: {:.0f} kWh over {:.0f} "
                          "h = {} at ${:.4f}/kWh; {} in all",
                          r.nodes * r.node_draw_w / 1000, r.avg_w / 1000, r.kwh, req.hours,
                          usd(r.energy_usd), req.usd_per_kwh, usd(r.total_usd()))
            : std::string());
    o += fmt::format("   plan for: {}.\n", plan_for(r, req.workload, cat));
  }
  if (!a.not_fitting.empty())
    o += fmt::format("\nNot considered (model does not fit): {}\n", fmt::join(a.not_fitting, "; "));
  if (!a.no_backend.empty())
    o += fmt::format("Not considered (loom's GPU backend is CUDA): {}\n",
                     fmt::join(a.no_backend, ", "));
  if (!a.no_host.empty())
    o += fmt::format("Not bought (no machine in the catalog carries them): {}\n",
                     fmt::join(a.no_host, "; "));
  return o;
}

namespace {

nlohmann::json option_json(const AdviseOption& o, const Advice& a, const AdviseRequest& req) {
  const StepEstimate& e = o.est;
  return {{"label", o.label()},
          {"gpu", o.gpu},
          {"gpus", o.gpus},
          {"nodes", o.nodes},
          {"host", o.host},
          {"host_kind", o.host_kind},
          {"rented", o.rented},
          {"intra", o.intra},
          {"inter", o.inter},
          {"gpu_usd", o.gpu_usd},
          {"host_usd", o.host_usd},
          {"capital_usd", o.capital_usd},
          {"energy_usd", o.energy_usd},
          {"rent_usd", o.rent_usd},
          {"total_usd", o.total_usd()},
          {"node_draw_w", o.node_draw_w},
          {"avg_w", o.avg_w},
          {"kwh", o.kwh},
          {"gpu_memory_gb", o.gpu_memory_gb},
          {"sync", o.sync.algorithm},
          {"codec", o.sync.codec},
          {"precision", o.precision},
          {"step_s", e.step_s},
          {"samples_per_s", e.samples_per_s},
          {"samples_per_s_low", e.samples_per_s * std::max(0.0, 1 - o.band)},
          {"samples_per_s_high", e.samples_per_s * (1 + o.band)},
          {"band", o.band},
          {"band_basis", o.band_basis},
          {"samples_per_kusd",
           o.rented ? nlohmann::json(nullptr) : nlohmann::json(o.samples_per_kusd())},
          {"samples_per_usd", o.samples_per_usd(req.hours)},
          {"hours_to_train",
           a.samples > 0 ? nlohmann::json(o.hours_to_train(a.samples)) : nlohmann::json(nullptr)},
          {"speedup", e.speedup},
          {"efficiency", e.efficiency},
          {"dominant", e.dominant()},
          {"limiter", e.limiter}};
}

nlohmann::json framework_term_json(const FrameworkTerm& t) {
  if (!t.valid()) return nullptr;
  return {{"slowest", t.high.software},
          {"slowest_offset", t.high.offset},
          {"fastest", t.low.software},
          {"fastest_offset", t.low.offset},
          {"spread", t.spread},
          {"slowest_factor", t.slowest(1)},
          {"fastest_factor", t.fastest(1)}};
}

}  // namespace

nlohmann::json advice_json(const Advice& a, const AdviseRequest& req, size_t n) {
  nlohmann::json ranked = nlohmann::json::array(), rented = nlohmann::json::array();
  for (size_t i = 0; i < std::min(n, a.ranked.size()); ++i)
    ranked.push_back(option_json(a.ranked[i], a, req));
  for (size_t i = 0; i < std::min(n, a.rented.size()); ++i)
    rented.push_back(option_json(a.rented[i], a, req));
  return {{"workload", req.workload.name},
          {"batch", req.train.batch},
          {"budget_usd", req.budget_usd},
          {"hours", req.hours},
          {"usd_per_kwh", req.usd_per_kwh},
          {"gpu_utilisation", req.gpu_utilisation},
          {"rank_by", req.rank_by},
          {"samples", a.samples > 0 ? nlohmann::json(a.samples) : nlohmann::json(nullptr)},
          {"samples_source", a.samples_source},
          {"band", a.band},
          {"typical", a.typical},
          {"framework_term", framework_term_json(builtin_framework_term())},
          {"ranked", ranked},
          {"rented", rented},
          {"cheapest_rental", a.cheapest_rental},
          {"not_fitting", a.not_fitting},
          {"no_host", a.no_host},
          {"no_backend", a.no_backend},
          {"notes", a.notes}};
}

}  // namespace loom::perf
