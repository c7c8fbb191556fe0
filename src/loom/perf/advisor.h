// The hardware advisor: every GPU with a price x count (powers of two) x inter-node link that
// the budget buys, predicted by the cost model with the best sync strategy and codec for it,
// ranked by samples/s. Configurations where the model does not fit the GPU's memory are never
// recommended; a budget that buys nothing is an InputError saying so.
// It recommends only what loom runs: its allreduce algorithms (ring, halving-doubling), its
// codecs, and fp32 training (loom has no mixed precision: a mixed request is ranked at fp32
// and says so). Each prediction carries the band of the model's leave-one-out error over the
// published validation set (validation_set.h), and says which term dominates the step.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "loom/perf/calibration.h"
#include "loom/perf/catalog.h"
#include "loom/perf/cost_model.h"

namespace loom::perf {

struct AdviseRequest {
  Workload workload;
  double budget_usd = 0;
  int max_gpus = 64;
  int gpus_per_node = 8;
  double node_usd = 2000;  // host per machine: CPU, board, RAM, PSU (an assumption, no source)
  std::vector<std::string> inter_links = {"10gbe", "100gbe", "ib-hdr"};
  std::vector<std::string> gpus;  // empty: every GPU with a price
  std::vector<std::string> codecs = {"fp32", "fp16", "int8", "powersgd",
                                     "onebit"};  // simplest first; loom runs each
  TrainSpec train;
  std::string storage = "nvme4";
  // Devices measured here (`loom advise --calibration FILE`, use_calibration below): their
  // measured rates replace the default deratings. Such a device is a CPU host: its workers
  // cost nothing beyond the machine (`measured_node_usd`, or node_usd when 0), and a machine
  // runs at most as many workers as it has cores.
  std::map<std::string, Derating> measured;
  double measured_node_usd = 0;
};

struct AdviseOption {
  std::string gpu;
  int gpus = 1, nodes = 1;
  std::string intra, inter;
  double cost_usd = 0;
  double gpu_memory_gb = 0;
  SyncSpec sync;
  StepEstimate est;
  double samples_per_kusd() const { return est.samples_per_s / (cost_usd / 1000); }
  std::string label() const;
};

struct Advice {
  std::vector<AdviseOption> ranked;      // fits, within budget; best first
  std::vector<std::string> not_fitting;  // "gtx-1080 (8 GB): needs 14.2 GB"
  double host_ram_gb_per_node = 0;       // seeds: host RAM >= the GPU memory in the machine
  // The model's error on published results it was not fitted to (leave-one-out): a
  // prediction p means the published figure lay within p x (1 +- band) for every case, and
  // p x (1 +- typical) on average.
  double band = 0, typical = 0;
  std::vector<std::string> notes;  // what was changed to keep to what loom runs
};

Advice advise(const Catalog& cat, const AdviseRequest& req);
// Adds the calibration's device "this-machine" (and its links) to `cat` and makes the
// advisor predict it from the measured figures (calibration.h); `machine_usd` (> 0) is the
// price of one more machine like this one.
void use_calibration(const Calibration& cal, Catalog& cat, AdviseRequest& req,
                     double machine_usd = 0);
// Plain lines: a table of the top `n`, then why for the top three.
std::string advice_report(const Advice& a, const AdviseRequest& req, size_t n = 10);

}  // namespace loom::perf
