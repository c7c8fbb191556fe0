// The step-time model: one data-parallel training step on `ranks` GPUs.
//   compute    = batch x seconds per sample of a published rate, or the GPU roofline's
//                per-sample time and fixed time per step (compute_model.h, gpu_roofline.h);
//                with a --derate figure, max(executed FLOPs / (peak x derating), bytes /
//                (bandwidth x 0.8))
//   comm       = buckets of gradients, ready in reverse layer order during backward, sent one
//                after another on the link (alpha-beta per hop, per algorithm and codec;
//                collective_model.h); what is not hidden behind backward is exposed (or all
//                of it, without overlap)
//   codec      = encode and decode on the device, memory-bound: passes over the fp32
//                gradient / (memory bandwidth x 0.8) (codec_model.h), or measured speeds
//   bmuf       = the model delta is reduced once every tau steps (Chen & Huo, ICASSP 2016)
//   stragglers = every step waits for the slowest of n GPUs: jitter_cv x E[max of n
//                standard normals] x compute (the expected maximum of n independent
//                normally distributed step times); not on this machine's CPU (host_model.h)
//   overhead   = the framework's per-step coordination (catalog [[framework]])
//   input      = the node's storage feeds its GPUs; with prefetch only the shortfall shows
//   update     = optimizer step, memory-bound (inside a published rate already)
// Weak scaling: the per-GPU batch is fixed, speedup(n) = n x step(1) / step(n).
#pragma once

#include <map>
#include <string>

#include "loom/perf/catalog.h"
#include "loom/perf/codec_model.h"
#include "loom/perf/collective_model.h"
#include "loom/perf/compute_model.h"
#include "loom/perf/host_model.h"
#include "loom/perf/workload.h"

namespace loom::perf {

// Coefficient of variation of one worker's compute time per step: the one parameter fitted
// to published results. Training subset: every case of data/hardware/validation.toml,
// minimising the mean absolute error; tests/perf/validation_test.cc refits it and checks
// this value, and refits it without each case in turn (leave-one-out, docs/perf.md).
inline constexpr double kStepJitterCv = 0.0336;

// Mixed precision with fp32 master weights moves more bytes a parameter than the update: each
// forward reads the fp32 weight and writes its 16-bit copy (4 + 2), each backward reads the
// 16-bit weight gradient and adds it to the fp32 one (2 + 4), and once a step the loss scale is
// taken off every gradient and checked for infinities in one pass that reads and writes it
// (4 + 4). PyTorch's autocast casts a weight once per forward and its GradScaler unscales with
// one fused kernel per step (torch.amp docs: "Automatic Mixed Precision", GradScaler.unscale_);
// TensorFlow's mixed precision keeps fp32 variables and casts them when read. Charged with the
// update on a GPU, per micro-batch for the casts.
inline constexpr double kMixedCastBytes = 12;
inline constexpr double kUnscaleBytes = 8;

// E[max of n independent standard normal variables] (0 for n = 1; 0.56 for 2, 3.24 for 1000).
double expected_max_normal(int n);

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
  // Seconds per sample and fixed seconds per step of compute from compute_model.h (a published
  // rate or the GPU roofline); 0: the whole-step roofline at `compute`. `whole_step`: the
  // rate includes the optimizer update (a published rate).
  double sample_s = 0;
  double step_s = 0;
  bool whole_step = false;
  void use(const ComputeRate& r) {
    sample_s = r.sample_s;
    step_s = r.step_s;
    whole_step = r.whole_step;
    compute = r.fraction_of_peak > 0 ? r.fraction_of_peak : compute;
  }
  double jitter_cv = kStepJitterCv;
};

// The bytes of loom's per-step agreement (SyncSpec::step_agreement_bytes).
inline constexpr double kLoomStepAgreementBytes = 32;

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
  // With algorithm two-level: false (loom's sync::two_level_compressed_allreduce) encodes only
  // the exchange across nodes, the stages inside nodes stay fp32; true casts or encodes before
  // a hierarchical allreduce of the encoded bytes, all stages shrinking (Horovod's fp16
  // compression, ChainerMN's half-precision allreduce: the published systems' way).
  bool codec_inside_nodes = false;
  // The framework's coordination per step on more than one worker (catalog [[framework]]).
  double step_overhead_s = 0;
  // Bytes of the small allreduce over all ranks that ends every step, in the run's algorithm:
  // loom's runtime agrees there on the step's outcome (train/checkpoint_guard.h: a NaN, a
  // stop, a checkpoint due, an fp16 overflow; 4 x int64). 0 for systems without one (the
  // published runs of the validation set).
  double step_agreement_bytes = kLoomStepAgreementBytes;
  // Share of the run's steps a codec's warm-up sums exactly in fp32 before the codec starts
  // (loom's codec.warmup_steps over the run's steps), in [0, 1): estimates are then the
  // run's mean step.
  double codec_warmup_share = 0;
};

struct TrainSpec {
  int64_t batch = 64;  // per GPU and micro-batch
  // Micro-batches per optimizer step (gradient accumulation): one exchange per step.
  int64_t accumulate = 1;
  std::string precision = "fp32";      // gpu_roofline.h math_plan: fp32, tf32, default, bf16, ...
  std::string layout = "nhwc";         // the activations' memory format: nhwc or nchw
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
  double straggler_s = 0;      // waiting for the slowest worker
  double overhead_s = 0;       // the framework's per-step coordination
  double step_s = 0;
  double samples_per_s = 0;
  double speedup = 1, efficiency = 1;  // against one GPU of the same kind
  MemoryBreakdown memory;
  bool fits = true;
  std::string limiter;  // compute, memory bandwidth, link, input, memory
  double compute_s() const { return fwd_s + bwd_s + update_s; }
  // The largest term of the step: "compute", "exposed communication" or "input".
  std::string dominant() const;
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
  // The small allreduce that ends each step (SyncSpec::step_agreement_bytes), on its own.
  double step_agreement_time(const StepContext& x) const;
  MemoryBreakdown memory_per_gpu(const StepContext& x) const;
  // Encoding and decoding `fp32_bytes` of gradients, and sending their encoded form.
  double codec_time(const StepContext& x, double fp32_bytes) const;
  // Whether the codec runs two-level (algorithm two-level over several nodes of several GPUs,
  // any codec but PowerSGD): fp32 inside nodes, encoded across them.
  bool two_level_codec(const StepContext& x) const;
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
