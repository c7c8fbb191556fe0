// The step-time model: one data-parallel training step on `ranks` GPUs.
//   compute  = max(FLOPs / (peak x derating), bytes moved / (memory bandwidth x derating))
//   comm     = buckets of gradients, ready in reverse layer order during backward, sent one
//              after another on the link (alpha-beta, per algorithm and codec); what is not
//              hidden behind backward is exposed (or all of it, without overlap)
//   bmuf     = the model delta is reduced once every tau steps (Chen & Huo, ICASSP 2016)
//   input    = the node's storage feeds its GPUs; with prefetch only the shortfall shows
//   update   = optimizer step, memory-bound
// Weak scaling: the per-GPU batch is fixed, speedup(n) = n x step(1) / step(n).
#pragma once

#include <map>
#include <string>

#include "loom/perf/catalog.h"
#include "loom/perf/codec_model.h"
#include "loom/perf/collective_model.h"
#include "loom/perf/host_model.h"
#include "loom/perf/workload.h"

namespace loom::perf {

// Fractions of peak that are achievable; calibration (calibration.h) sets them from measured
// GEMM FLOP/s, memory bandwidth, allreduce busbw and codec GB/s.
struct Derating {
  double compute = 0.5;  // end-to-end fraction of peak FLOP/s (hardware.md G: ~50-58% MFU)
  double memory = 0.8;   // fraction of peak memory bandwidth
  std::map<std::string, double> codec_gbs;  // measured codec speed (fp32 GB/s in), by codec
  // Measured encode and decode speeds separately (fp32 GB/s), by codec: the stripe exchange
  // encodes (1 + 1/n) and decodes 2 gradients' worth per rank, so they weigh differently.
  std::map<std::string, std::pair<double, double>> codec_enc_dec_gbs;
  // This machine's CPU, measured part by part (host_model.h); when valid, compute, update and
  // the CPU share of communication come from it instead of the roofline.
  HostRates host;
};

struct SyncSpec {
  std::string algorithm = "ring";  // ring, hd, two-level, ps
  std::string codec = "fp32";
  bool bmuf = false;  // block momentum: allreduce the block delta every tau steps
  int tau = 1;
  double bucket_mb = 25;  // PyTorch DDP's default
  bool overlap = true;    // allreduce buckets during backward
  // ZeRO-1: with an uncompressed allreduce each rank updates 1/n of the parameters (loom's
  // sync.shard_optimizer; codecs turn it off).
  bool shard_optimizer = false;
  // Share of the run's steps a codec's warm-up sums exactly in fp32 before the codec starts
  // (loom's codec.warmup_steps over the run's steps), in [0, 1): estimates are then the
  // run's mean step.
  double codec_warmup_share = 0;
};

struct TrainSpec {
  int64_t batch = 64;                  // per GPU
  std::string precision = "fp32";      // fp32 or mixed (fp16/bf16 tensor cores, fp32 master)
  std::string optimizer = "momentum";  // sgd, momentum, adam
  bool prefetch = true;
  int threads = 1;  // intra-op threads per worker (host model only)
};

struct Cluster {
  GpuSpec gpu;
  Topology topo;
  StorageSpec storage{"nvme4", 7000, ""};
};

struct MemoryBreakdown {
  double weights = 0, grads = 0, optimizer = 0, activations = 0, codec = 0, reserve = 0;
  double total() const { return weights + grads + optimizer + activations + codec + reserve; }
};

struct StepEstimate {
  int ranks = 1;
  double fwd_s = 0, bwd_s = 0;
  bool compute_memory_bound = false;
  double comm_s = 0;          // link busy time per step (amortised for BMUF)
  double codec_s = 0;         // encode/decode time per step
  double comm_exposed_s = 0;  // communication + codec time not hidden behind backward
  double update_s = 0;
  double input_s = 0;          // time to read a step's input
  double input_exposed_s = 0;  // what prefetch could not hide
  double step_s = 0;
  double samples_per_s = 0;
  double speedup = 1, efficiency = 1;  // against one GPU of the same kind
  MemoryBreakdown memory;
  bool fits = true;
  std::string limiter;  // compute, memory bandwidth, link, input, memory
};

class CostModel {
 public:
  CostModel(Workload w, Cluster c, SyncSpec s, TrainSpec t, Derating d = {});
  // The estimate on the cluster's full size, with speedup against one GPU.
  StepEstimate estimate() const;
  // The same, on `nodes` x `gpus_per_node` (a sweep point).
  StepEstimate estimate_at(int nodes, int gpus_per_node) const;

  const Workload& workload() const { return workload_; }
  const Cluster& cluster() const { return cluster_; }

 private:
  struct StepContext;  // the sizes and rates one estimate works from (cost_model.cc)
  struct Exchange;     // one step's gradient exchange

  StepEstimate raw(const Topology& topo) const;
  // raw(), with a codec warm-up's fp32 steps folded into the mean step (codec_warmup_share).
  StepEstimate over_run(const Topology& topo) const;
  StepContext context(const Topology& topo) const;
  // Forward + backward seconds; `memory_bound` says whether memory traffic set them.
  double compute_time(const StepContext& x, bool& memory_bound) const;
  double update_time(const StepContext& x) const;
  MemoryBreakdown memory_per_gpu(const StepContext& x) const;
  // Encoding and decoding `fp32_bytes` of gradients, and sending their encoded form.
  double codec_time(const StepContext& x, double fp32_bytes) const;
  double link_time(const StepContext& x, double fp32_bytes) const;
  Exchange gradient_exchange(const StepContext& x, double bwd_s) const;
  Exchange bmuf_exchange(const StepContext& x, double bwd_s) const;
  Exchange bucketed_exchange(const StepContext& x, double bwd_s) const;
  double idle_core_share(const StepContext& x) const;
  bool link_steals_compute(const StepContext& x) const;
  double input_time(const StepContext& x) const;
  double exposed_input_time(const StepContext& x, double input_s, double busy_s,
                            double idle_core_share) const;
  static std::string limiter(const StepEstimate& e, double compute_s);

  Workload workload_;
  Cluster cluster_;
  SyncSpec sync_;
  TrainSpec train_;
  Derating derating_;
  CodecModel codec_;
  Algorithm algorithm_;
};

std::string format_seconds(double s);

}  // namespace loom::perf
