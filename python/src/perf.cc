// loom._loom.scale and loom._loom.advise: the performance model as `loom scale` and `loom advise`
// run it (perf::predict_scale, perf::advise), answering with the JSON that their --json prints.
// python/loom/perf.py gives them keyword arguments named after the command-line flags.
#include <pybind11/stl.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "bindings.h"
#include "loom/experiments/workloads.h"
#include "loom/perf/advisor.h"
#include "loom/perf/calibration.h"
#include "loom/perf/scale.h"

namespace loom::python {
namespace {

// opts[key] as T, or `def` when absent or None.
template <typename T>
T opt(const py::dict& opts, const char* key, T def) {
  if (!opts.contains(key) || opts[key].is_none()) return def;
  return opts[key].cast<T>();
}

// --batch (0: the workload's default), --precision, --optimizer, --accumulate, --layout, read
// with the GIL held.
struct TrainChoice {
  int64_t batch = 0;
  std::string precision, optimizer;
  int64_t accumulate = 1;
  std::string layout = "nhwc";
  perf::TrainSpec spec(const perf::Workload& w) const {
    perf::TrainSpec t;
    t.batch = batch > 0 ? batch : w.default_batch;
    t.precision = precision;
    t.layout = layout;
    t.optimizer = optimizer;
    t.accumulate = accumulate;
    return t;
  }
};
// `default_precision`: scale's "default" (PyTorch's own), advise's "fp32" (what loom runs).
TrainChoice train_choice(const py::dict& opts, const std::string& default_precision) {
  return {opt<int64_t>(opts, "batch", 0), opt<std::string>(opts, "precision", default_precision),
          opt<std::string>(opts, "optimizer", "momentum"), opt<int64_t>(opts, "accumulate", 1),
          opt<std::string>(opts, "layout", "nhwc")};
}

// `loom scale -w WORKLOAD ... --json`: its JSON lines, in order, as one JSON array.
std::string scale(const py::dict& opts) {
  perf::ScaleRequest r;
  const std::string workload = opt<std::string>(opts, "workload", "resnet50");
  r.gpu = opt<std::string>(opts, "gpu", r.gpu);
  r.nodes = opt<int>(opts, "nodes", r.nodes);
  r.gpus_per_node = opt<int>(opts, "gpus_per_node", r.gpus_per_node);
  r.inter = opt<std::string>(opts, "inter", r.inter);
  r.intra = opt<std::string>(opts, "intra", r.intra);
  r.nics = opt<int>(opts, "nics", r.nics);
  r.servers = opt<int>(opts, "servers", r.servers);
  r.tau = opt<int>(opts, "tau", r.tau);
  r.oversubscription = opt<double>(opts, "oversubscription", r.oversubscription);
  r.framework = opt<std::string>(opts, "framework", r.framework);
  r.sync = opt<std::string>(opts, "sync", r.sync);
  r.codecs = opt<std::vector<std::string>>(opts, "codecs", r.codecs);
  r.storage = opt<std::string>(opts, "storage", r.storage);
  r.bucket_mb = opt<double>(opts, "bucket_mb", r.bucket_mb);
  r.overlap = opt<bool>(opts, "overlap", r.overlap);
  r.prefetch = opt<bool>(opts, "prefetch", r.prefetch);
  r.derate = opt<double>(opts, "derate", r.derate);
  r.calibration = opt<std::string>(opts, "calibration", "");
  const TrainChoice train = train_choice(opts, "default");
  const auto catalogs = opt<std::vector<std::string>>(opts, "catalog", {});
  py::gil_scoped_release nogil;
  perf::Catalog cat = perf::Catalog::builtin();
  for (const auto& f : catalogs) cat.load_file(f);
  const perf::Workload w = experiments::resolve_workload(workload);
  r.train = train.spec(w);
  const perf::ScalePrediction p = perf::predict_scale(std::move(cat), w, r);
  nlohmann::json out = nlohmann::json::array();
  for (const perf::ScaleSeries& series : p.series)
    for (const perf::ScalePoint& point : series.points)
      out.push_back(perf::scale_point_json(series, point));
  return out.dump();
}

// `loom advise -m MODEL --budget B ... --json`: its JSON object.
std::string advise(const py::dict& opts) {
  perf::AdviseRequest r;
  const std::string model = opt<std::string>(opts, "model", "resnet50");
  r.budget_usd = opt<double>(opts, "budget", 0);
  r.max_gpus = opt<int>(opts, "max_gpus", r.max_gpus);
  r.gpus_per_node = opt<int>(opts, "gpus_per_node", r.gpus_per_node);
  r.hosts = opt<std::vector<std::string>>(opts, "hosts", {});
  r.hours = opt<double>(opts, "hours", r.hours);
  r.usd_per_kwh = opt<double>(opts, "usd_per_kwh", r.usd_per_kwh);
  r.gpu_utilisation = opt<double>(opts, "gpu_utilisation", r.gpu_utilisation);
  r.samples = opt<double>(opts, "samples", 0);
  r.rank_by = opt<std::string>(opts, "rank_by", r.rank_by);
  r.cloud = opt<bool>(opts, "cloud", true);
  const auto links = opt<std::vector<std::string>>(opts, "links", {});
  if (!links.empty()) r.inter_links = links;
  const auto gpus = opt<std::vector<std::string>>(opts, "gpus", {});
  const TrainChoice train = train_choice(opts, "fp32");
  if (train.precision != "fp32" && train.precision != "mixed")
    throw py::value_error("precision = \"" + train.precision +
                          "\": advise ranks what loom trains in: give fp32 or mixed");
  const auto catalogs = opt<std::vector<std::string>>(opts, "catalog", {});
  const std::string calibration = opt<std::string>(opts, "calibration", "");
  const double machine_usd = opt<double>(opts, "machine_usd", 0);
  const int top = opt<int>(opts, "top", 10);
  if (r.rank_by != "time" && r.rank_by != "capital" && r.rank_by != "total")
    throw py::value_error("rank_by = \"" + r.rank_by + "\": give time, capital or total");
  py::gil_scoped_release nogil;
  perf::Catalog cat = perf::Catalog::builtin();
  for (const auto& f : catalogs) cat.load_file(f);
  r.workload = experiments::resolve_workload(model);
  if (!calibration.empty())
    perf::use_calibration(perf::read_calibration(calibration), cat, r, machine_usd);
  r.gpus = gpus;
  r.train = train.spec(r.workload);
  const perf::Advice adv = perf::advise(cat, r);
  return perf::advice_json(adv, r, size_t(std::max(top, 0))).dump();
}

}  // namespace

void register_perf(py::module_& m) {
  m.def("scale", &scale, py::arg("options"),
        "loom scale's prediction as a JSON array of its --json lines (loom.scale wraps it).");
  m.def("advise", &advise, py::arg("options"),
        "loom advise's ranking as its --json object (loom.advise wraps it).");
}

}  // namespace loom::python
