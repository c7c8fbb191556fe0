// The hardware advisor: machines that exist, priced to run. Every GPU with a price x count
// (powers of two) in every host class of the catalog that carries it (host_fit.h: slots,
// power, SXM only on its baseboard; the class's topology gives the link between its GPUs), in
// one machine or several on an inter-node link the class takes; and every cloud row as a
// rental. Each is predicted by the cost model with the best sync strategy and codec for it.
//   capital  GPUs x price + machines x the host class's price (the budget buys this)
//   energy   (GPU TDP x the average utilisation + the host's load) x hours x price per kWh
//   rent     a cloud row's price per GPU-hour x GPUs x hours (the budget pays this)
// Ranked by time to train (samples/s), by samples/s per capital dollar, or by samples per
// dollar of capital and energy over the hours; all three are shown.
// Configurations where the model does not fit the GPU's memory are never recommended; a
// budget that buys no machine says what the cheapest one costs.
// It recommends only what loom runs: CUDA GPUs (others are listed as not considered), its
// allreduce algorithms (ring, halving-doubling, and two-level across machines of several
// GPUs), its codecs, and the precision loom trains in on each GPU (a mixed request is ranked
// at bf16 or fp16 where loom runs them, fp32 elsewhere: loom_precision in catalog.h). Each
// prediction carries the band of the model's leave-one-out error over the published validation set
// (validation_set.h), and says which term dominates the step.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loom/perf/calibration.h"
#include "loom/perf/catalog.h"
#include "loom/perf/cost_model.h"

namespace loom::perf {

// The running-cost defaults (docs/perf.md, "Running cost"):
// a year of training around the clock (the buyer's horizon: --hours);
inline constexpr double kDefaultHours = 8760;
// the US average commercial price of electricity, March 2023 (EIA, as reported by
// shrinkthatfootprint.com, 2023): 12.52 cents per kWh;
inline constexpr double kDefaultUsdPerKwh = 0.1252;
// an 8-GPU H100 node training ran at 76% of its rated power (Newkirk et al. 2025,
// arXiv:2506.14551, measured at Brookhaven): the GPUs' average draw as a share of TDP.
inline constexpr double kDefaultGpuUtilisation = 0.76;

struct AdviseRequest {
  Workload workload;
  double budget_usd = 0;  // for the machines (capital), or the rent over `hours`
  int max_gpus = 64;
  int gpus_per_node = 8;  // at most this many GPUs in one machine
  std::vector<std::string> inter_links = {"10gbe", "100gbe", "ib-hdr"};
  std::vector<std::string> gpus;   // empty: every GPU with a price
  std::vector<std::string> hosts;  // host classes to consider; empty: every one
  std::vector<std::string> codecs = {"fp32", "fp16", "int8", "powersgd",
                                     "onebit"};  // simplest first; loom runs each
  TrainSpec train;
  std::string storage = "nvme4";
  double hours = kDefaultHours;
  double usd_per_kwh = kDefaultUsdPerKwh;
  double gpu_utilisation = kDefaultGpuUtilisation;
  double samples = 0;            // to train, for the time column; 0: the workload's
  std::string rank_by = "time";  // time, capital or total
  bool cloud = true;             // add the catalog's cloud rows as rentals
  // Devices measured here (`loom advise --calibration FILE`, use_calibration below): their
  // measured rates replace the default deratings. Such a device is a CPU host: its workers
  // cost nothing beyond the machine (`measured_node_usd` each), and a machine runs at most as
  // many workers as it has cores. Its power is not measured: no energy is charged.
  std::map<std::string, Derating> measured;
  double measured_node_usd = 0;
};

struct AdviseOption {
  std::string gpu;
  int gpus = 1, nodes = 1;
  std::string host;  // host class, the cloud row when rented, "this-machine" when measured
  std::string host_kind;
  bool rented = false;
  std::string intra, inter;
  double gpu_usd = 0, host_usd = 0;  // capital: the GPUs, the machines
  double capital_usd = 0, energy_usd = 0, rent_usd = 0;
  double node_draw_w = 0;  // one machine at load
  double avg_w = 0;        // all machines, on average while training
  double kwh = 0;          // over the hours
  double gpu_memory_gb = 0;
  std::string host_why;  // why this host class carries it (host_fit.h)
  SyncSpec sync;
  std::string precision = "fp32";  // loom's `precision` on this GPU (loom_precision)
  StepEstimate est;
  // The model's leave-one-source-out error for this GPU's generation and precision
  // (validation_set.h prediction_band): the published figure would lie within
  // samples/s x (1 +- band), and x (1 +- typical) on average.
  double band = 0, typical = 0;
  std::string band_basis;
  double total_usd() const { return capital_usd + energy_usd + rent_usd; }
  // Samples/s per $1,000 of capital (0 when rented).
  double samples_per_kusd() const;
  // Samples trained per dollar of capital, energy and rent over `hours`.
  double samples_per_usd(double hours) const;
  double hours_to_train(double samples) const { return samples / est.samples_per_s / 3600; }
  std::string label() const;
};

struct Advice {
  std::vector<AdviseOption> ranked;      // machines to buy, within budget; best first
  std::vector<AdviseOption> rented;      // cloud rentals within budget; best first
  std::vector<std::string> not_fitting;  // "gtx-1080 (8 GB): needs 14.2 GB"
  std::vector<std::string> no_host;      // "mi300x: no host class carries an oam module ..."
  std::vector<std::string> no_backend;   // GPUs loom does not run (not CUDA): "mi300x"
  std::string cheapest_rental;           // when no rental is within budget
  double samples = 0;                    // the time column's samples
  std::string samples_source;
  // The model's error on published throughput it was not fitted to (leave one source out),
  // over every GPU: the widest, and the mean. Each option carries its own band.
  double band = 0, typical = 0;
  std::vector<std::string> notes;  // what was changed to keep to what loom runs
};

Advice advise(const Catalog& cat, const AdviseRequest& req);
// Adds the calibration's device "this-machine" (and its links) to `cat` and makes the
// advisor predict it from the measured figures (calibration.h); `machine_usd` (> 0) is the
// price of one more machine like this one.
void use_calibration(const Calibration& cal, Catalog& cat, AdviseRequest& req, double machine_usd);
// Plain lines: a table of the top `n` machines and of the rentals, then why for the top
// three: host class, power drawn, and what a buyer must plan for (circuit, cooling, RAM,
// storage).
std::string advice_report(const Advice& a, const AdviseRequest& req, const Catalog& cat,
                          size_t n = 10);
// The same advice as one JSON object (`loom advise --json`, the Python package's loom.advise):
// the top `n` machines ("ranked") and rentals ("rented"), each with its prices, power, sync and
// step estimate, and the lists and figures the report prints around them.
nlohmann::json advice_json(const Advice& a, const AdviseRequest& req, size_t n = 10);

}  // namespace loom::perf
