#include "loom/perf/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "loom/core/error.h"
#include "loom/perf/compute_model.h"

namespace loom::perf {

double expected_max_normal(int n) {
  if (n <= 1) return 0;
  thread_local std::map<int, double> cache;
  if (auto it = cache.find(n); it != cache.end()) return it->second;
  // E[max] = integral of x n phi(x) Phi(x)^(n-1) dx, midpoint rule on [-8, 8 + log n].
  const double lo = -8, hi = 8 + std::log(double(n)), h = 1e-3;
  double sum = 0;
  for (double x = lo + h / 2; x < hi; x += h) {
    const double phi = std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    const double Phi = 0.5 * std::erfc(-x / std::sqrt(2.0));
    sum += x * n * phi * std::pow(Phi, n - 1) * h;
  }
  return cache[n] = sum;
}

std::string StepEstimate::dominant() const {
  const double compute = compute_s() + straggler_s + overhead_s;
  if (comm_exposed_s >= compute && comm_exposed_s >= input_exposed_s)
    return "exposed communication";
  if (input_exposed_s > compute) return "input";
  return "compute";
}

std::string format_seconds(double s) {
  if (s >= 1) return fmt::format("{:.2f} s", s);
  if (s >= 1e-3) return fmt::format("{:.1f} ms", s * 1e3);
  return fmt::format("{:.0f} us", s * 1e6);
}

CostModel::CostModel(Workload w, Cluster c, SyncSpec s, TrainSpec t, Derating d)
    : workload_(std::move(w)),
      cluster_(std::move(c)),
      sync_(std::move(s)),
      train_(std::move(t)),
      derating_(std::move(d)),
      codec_(codec_model(sync_.codec)),
      algorithm_(algorithm_from_name(sync_.algorithm)) {
  if (train_.batch <= 0) throw InputError(fmt::format("batch must be > 0, got {}", train_.batch));
  if (!(sync_.codec_warmup_share >= 0 && sync_.codec_warmup_share < 1))
    throw InputError(
        fmt::format("codec warm-up share must be in [0, 1), got {}", sync_.codec_warmup_share));
  if (!is_precision(train_.precision))
    throw InputError(
        fmt::format("precision must be {}, got '{}'", kPrecisionNames, train_.precision));
  if (train_.optimizer != "sgd" && train_.optimizer != "momentum" && train_.optimizer != "adam")
    throw InputError(
        fmt::format("optimizer must be sgd, momentum or adam, got '{}'", train_.optimizer));
  if (sync_.tau < 1) throw InputError(fmt::format("tau must be >= 1, got {}", sync_.tau));
  if (train_.accumulate < 1)
    throw InputError(fmt::format("accumulate must be >= 1, got {}", train_.accumulate));
  if (sync_.bucket_mb <= 0)
    throw InputError(fmt::format("bucket size must be > 0 MB, got {}", sync_.bucket_mb));
  if (cluster_.topo.nodes < 1 || cluster_.topo.gpus_per_node < 1)
    throw InputError(fmt::format("need at least one node and one GPU per node, got {} x {}",
                                 cluster_.topo.nodes, cluster_.topo.gpus_per_node));
}

StepEstimate CostModel::estimate() const {
  return estimate_at(cluster_.topo.nodes, cluster_.topo.gpus_per_node);
}

StepEstimate CostModel::estimate_at(int nodes, int gpus_per_node) const {
  Topology one = cluster_.topo;
  one.nodes = 1;
  one.gpus_per_node = 1;
  Topology t = cluster_.topo;
  t.nodes = nodes;
  t.gpus_per_node = gpus_per_node;
  StepEstimate base = raw(one);
  StepEstimate e = over_run(t);
  e.speedup = e.ranks * base.step_s / e.step_s;
  e.efficiency = e.speedup / e.ranks;
  return e;
}

struct CostModel::StepContext {
  Topology topo;  // links at the rates the step meets (host links shared by the ranks)
  int ranks = 1;
  int host_ranks = 1;  // ranks sharing one machine's cores (Topology::ranks_per_host)
  bool mixed = false;  // fp16/bf16 tensor cores with fp32 master weights
  MathPlan plan{};     // the math of the step's products
  double batch = 0;    // samples per GPU
  double params = 0;
  double flops_rate = 0;  // achievable FLOP/s (roofline)
  double mem_rate = 0;    // achievable memory bytes/s (roofline)
  double act_bytes = 0;   // activations stored per sample, at the step's precision
  double weight_bytes = 0;
  // Optimizer update, memory-bound: bytes touched per parameter (read w, g, state; write w,
  // state).
  double update_bytes = 0;
  bool on_host = false;  // this machine's CPU, measured part by part (Derating::host)
  int threads = 1;       // intra-op threads per worker
};

struct CostModel::Exchange {
  double codec_s = 0, comm_s = 0;
  double exposed_s = 0;      // not hidden behind backward
  double first_ready_s = 0;  // when the first bucket goes to the communication thread
};

CostModel::StepContext CostModel::context(const Topology& topo) const {
  const GpuSpec& g = cluster_.gpu;
  StepContext x{topo};
  x.ranks = topo.ranks();
  x.host_ranks = topo.ranks_per_host();
  x.mixed = is_low_precision(train_.precision);
  x.batch = static_cast<double>(train_.batch);
  x.params = workload_.params();
  x.plan = math_plan(g, train_.precision, train_.layout);
  x.flops_rate = peak_flops(g, x.plan.gemm) * derating_.compute;
  x.mem_rate = g.mem_bw_gbs * 1e9 * derating_.memory;
  x.act_bytes = workload_.activation_bytes * (x.mixed ? 0.5 : 1.0);
  x.weight_bytes = x.params * (x.mixed ? 2.0 : 4.0);
  x.update_bytes = train_.optimizer == "sgd" ? 12 : train_.optimizer == "momentum" ? 20 : 28;
  x.on_host = derating_.host.valid();
  x.threads = std::max(1, train_.threads);
  if (x.on_host) {
    // A link measured on this machine's CPU (shared memory, loopback TCP) copies its bytes on
    // the ranks' cores: with more ranks than cores, each stage runs at the ranks' core share
    // (host_model.h link_share). All ranks of the machine exchange at once, one thread each.
    for (LinkSpec* l : {&x.topo.intra, &x.topo.inter})
      l->efficiency *= derating_.host.link_share(l->name, x.host_ranks);
    // More ranks than cores: each message in sequence also waits for its receiver to be
    // given a core (host_model.h shared_core_message_s), on every link a rank here receives.
    const HostRates& h = derating_.host;
    if (h.shared_core_message_s > 0 && h.cores > 0 && x.host_ranks > h.cores) {
      for (LinkSpec* l : {&x.topo.intra, &x.topo.inter})
        l->latency_us = std::max(l->latency_us, h.shared_core_message_s * 1e6);
    }
  }
  return x;
}

double CostModel::compute_time(const StepContext& x, bool& memory_bound) const {
  const HostRates& host = derating_.host;
  if (x.on_host) {
    // This CPU, part by part at measured rates (host_model.h): the step's GEMMs at the GEMM
    // rate of its own shapes, the layers between them at the elementwise rate.
    const double gemm_s =
        x.batch * workload_.step_flops() / host.gemm_rate(x.host_ranks, x.threads);
    const auto& ew = host.elementwise_bytes.empty() ? host.stream_bytes : host.elementwise_bytes;
    const double ew_s =
        x.batch * workload_.elementwise_bytes / host.share(ew, x.host_ranks, x.threads);
    memory_bound = ew_s > gemm_s;
    return gemm_s + ew_s;
  }
  if (derating_.sample_s > 0) {
    memory_bound = false;
    return x.batch * derating_.sample_s + derating_.step_s;
  }
  // Roofline of the whole step on the FLOPs the kernels execute. Traffic: activations written
  // in forward and read twice in backward; weights read in forward and backward, gradients
  // written.
  const double t_flops = x.batch * executed_train_flops(workload_, x.plan.conv) / x.flops_rate;
  const double t_mem = (3 * x.batch * x.act_bytes + 3 * x.weight_bytes) / x.mem_rate;
  memory_bound = t_mem > t_flops;
  return std::max(t_flops, t_mem);
}

double CostModel::update_time(const StepContext& x) const {
  if (!x.on_host && derating_.whole_step) return 0;  // a published rate is a whole step
  if (!x.on_host) {
    double bytes = x.update_bytes;
    // Mixed precision keeps fp32 master weights (kMixedCastBytes, kUnscaleBytes).
    if (x.mixed) bytes += kMixedCastBytes * static_cast<double>(train_.accumulate) + kUnscaleBytes;
    return x.params * bytes / x.mem_rate;
  }
  const HostRates& host = derating_.host;
  double update_s =
      x.params * x.update_bytes / host.share(host.stream_bytes, x.host_ranks, x.threads);
  if (sync_.shard_optimizer && codec_.name == "fp32" && x.ranks > 1) update_s /= x.ranks;
  return update_s;
}

MemoryBreakdown CostModel::memory_per_gpu(const StepContext& x) const {
  const double P = x.params;
  MemoryBreakdown m;
  m.weights = x.mixed ? 6 * P : 4 * P;  // fp16 copy + fp32 master
  m.grads = x.mixed ? 2 * P : 4 * P;
  m.optimizer = train_.optimizer == "sgd" ? 0 : train_.optimizer == "momentum" ? 4 * P : 8 * P;
  m.activations = x.batch * x.act_bytes;
  if (x.ranks > 1 || sync_.bmuf) {
    // Error feedback keeps a residual per parameter; two-level, one per node-shard only.
    const double residual = two_level_codec(x) ? 4 * P / x.topo.gpus_per_node : 4 * P;
    m.codec = P * 4 * codec_.ratio() + (codec_.error_feedback ? residual : 0);
    if (sync_.bmuf) m.codec += 8 * P;  // block start weights and block momentum
  }
  m.reserve = 0.5e9;  // CUDA context, library workspaces (estimate)
  return m;
}

bool CostModel::two_level_codec(const StepContext& x) const {
  return algorithm_ == Algorithm::kTwoLevel && !sync_.codec_inside_nodes &&
         codec_.collectives == 1 && x.topo.nodes > 1 && x.topo.gpus_per_node > 1;
}

double CostModel::codec_time(const StepContext& x, double fp32_bytes_all) const {
  // Two-level: each rank encodes only its node-shard, 1/K of the bucket, in an exchange among
  // the M nodes (sync/allreduce/two_level_compressed_allreduce.h).
  const bool two = two_level_codec(x);
  const double fp32_bytes = two ? fp32_bytes_all / x.topo.gpus_per_node : fp32_bytes_all;
  if (auto it = derating_.codec_enc_dec_gbs.find(codec_.name);
      it != derating_.codec_enc_dec_gbs.end()) {
    // Stripe exchange per rank: encode the gradient, re-encode its own 1/n stripe of the
    // sum; decode n stripes of 1/n as owner and the n gathered stripes (compressed
    // allreduce, compress/compressed_allreduce.h). Summable codecs: encode + decode once.
    const double n = two ? x.topo.nodes : x.ranks;
    const bool stripes = codec_.aggregation == Aggregation::kStripeExchange;
    const double enc = stripes ? 1 + 1 / n : 1, dec = stripes ? 2 : 1;
    return fp32_bytes * (enc / (it->second.first * 1e9) + dec / (it->second.second * 1e9));
  }
  if (auto it = derating_.codec_gbs.find(codec_.name); it != derating_.codec_gbs.end())
    return fp32_bytes / (it->second * 1e9);
  // Mixed precision keeps gradients in 16 bits already: nothing to cast.
  if (x.mixed && (codec_.name == "fp16" || codec_.name == "bf16")) return 0;
  return codec_.memory_passes * fp32_bytes / x.mem_rate +
         codec_.extra_flops_per_element * (fp32_bytes / 4) / x.flops_rate;
}

double CostModel::link_time(const StepContext& x, double fp32_bytes) const {
  // fp32 inside nodes, the codec across them (two_level_codec_seconds).
  if (two_level_codec(x)) return two_level_codec_seconds(x.topo, fp32_bytes, codec_);
  const double wire = fp32_bytes * codec_.ratio();
  if (codec_.aggregation == Aggregation::kAllgather) return allgather_seconds(x.topo, wire);
  if (codec_.aggregation == Aggregation::kStripeExchange)
    return stripe_exchange_seconds(x.topo, wire);
  double t = 0;
  for (int i = 0; i < codec_.collectives; ++i)
    t += allreduce_seconds(algorithm_, x.topo, wire / codec_.collectives);
  return t;
}

CostModel::Exchange CostModel::gradient_exchange(const StepContext& x, double bwd_s) const {
  if (x.ranks <= 1) {
    Exchange none;
    none.first_ready_s = bwd_s;
    return none;
  }
  return sync_.bmuf ? bmuf_exchange(x, bwd_s) : bucketed_exchange(x, bwd_s);
}

// One allreduce of the whole model delta per block of tau local steps, after the block:
// nothing overlaps, but it is shared by tau steps.
CostModel::Exchange CostModel::bmuf_exchange(const StepContext& x, double bwd_s) const {
  const double bytes = 4 * x.params;
  Exchange ex;
  ex.first_ready_s = bwd_s;
  ex.codec_s = codec_time(x, bytes) / sync_.tau;
  ex.comm_s = link_time(x, bytes) / sync_.tau;
  ex.exposed_s = ex.codec_s + ex.comm_s;
  return ex;
}

// Buckets: walk the layers backward; a bucket is sent once bucket_mb of gradients are ready;
// big layers split into several buckets ready at the same time. Buckets go on the link one
// after another, each when it is ready (with overlap) or after backward (without).
CostModel::Exchange CostModel::bucketed_exchange(const StepContext& x, double bwd_s) const {
  const double bucket = sync_.bucket_mb * 1e6;
  const double total_flops = std::max(workload_.fwd_flops(), 1.0);
  Exchange ex;
  ex.first_ready_s = bwd_s;
  double clock = 0, link_free = 0, pending = 0;
  auto send = [&](double bytes, double ready) {
    ex.first_ready_s = std::min(ex.first_ready_s, ready);
    const double codec_s = codec_time(x, bytes), comm_s = link_time(x, bytes);
    ex.codec_s += codec_s;
    ex.comm_s += comm_s;
    const double start = sync_.overlap ? std::max(ready, link_free) : std::max(bwd_s, link_free);
    link_free = start + codec_s + comm_s;
  };
  for (auto it = workload_.layers.rbegin(); it != workload_.layers.rend(); ++it) {
    clock += bwd_s * it->fwd_flops / total_flops;
    pending += 4 * it->params;
    while (pending >= bucket) {
      send(bucket, clock);
      pending -= bucket;
    }
  }
  if (pending > 0) send(pending, bwd_s);
  ex.exposed_s = std::max(0.0, link_free - bwd_s);
  return ex;
}

// On a CPU host the communication thread and the loader need cores too: overlap hides their
// work only on cores the workers' compute threads leave idle (idle cores per rank, at most 1);
// the rest adds to the step.
double CostModel::idle_core_share(const StepContext& x) const {
  if (!x.on_host) return 1.0;
  return std::clamp(double(derating_.host.cores - x.host_ranks * x.threads) / x.host_ranks, 0.0,
                    1.0);
}

// The communication thread beside the compute threads (host_model.h BusyLink): from the first
// bucket on, it runs (or polls for its peer) until the exchange is done, taking `link_steal`
// of the compute threads' rate for the rest of backward. Without overlap the exchange starts
// after backward and nothing runs beside the compute. The share is set only for a host's CPU:
// by the link's pick from a calibration (validate.h), or by auto's check of a run
// (auto_choice.h), which has no host model beside it.
bool CostModel::link_steals_compute(const StepContext& x) const {
  return sync_.overlap && derating_.host.link_steal > 0 && x.ranks > 1 && !sync_.bmuf;
}

// The node's storage reads a step's input for all its GPUs.
double CostModel::input_time(const StepContext& x) const {
  return x.topo.gpus_per_node * x.batch * workload_.input_bytes / (cluster_.storage.read_mbs * 1e6);
}

// Prefetch hides the read behind the rest of the step; on a host each worker's loader thread
// also does its own share of that work on the cores left to it.
double CostModel::exposed_input_time(const StepContext& x, double input_s, double busy_s,
                                     double idle_core_share) const {
  double exposed = train_.prefetch ? std::max(0.0, input_s - busy_s) : input_s;
  if (x.on_host)
    exposed = std::max(exposed, input_s / x.topo.gpus_per_node * (1 - idle_core_share));
  return exposed;
}

std::string CostModel::limiter(const StepEstimate& e, double compute_s) {
  if (!e.fits) return "memory";
  const double link = e.comm_exposed_s, input = e.input_exposed_s;
  if (link >= compute_s && link >= input) return "link";
  if (input >= compute_s) return "input";
  return e.compute_memory_bound ? "memory bandwidth" : "compute";
}

StepEstimate CostModel::over_run(const Topology& topo) const {
  StepEstimate e = raw(topo);
  const double f = sync_.codec_warmup_share;
  if (f == 0 || codec_.name == "fp32") return e;
  // The warm-up's steps are fp32 allreduces with full (unsharded) updates.
  SyncSpec warm = sync_;
  warm.codec = "fp32";
  warm.codec_warmup_share = 0;
  warm.shard_optimizer = false;
  const StepEstimate w = CostModel(workload_, cluster_, warm, train_, derating_).raw(topo);
  auto mix = [f](double codec, double fp32) { return (1 - f) * codec + f * fp32; };
  e.comm_s = mix(e.comm_s, w.comm_s);
  e.codec_s = mix(e.codec_s, w.codec_s);
  e.comm_exposed_s = mix(e.comm_exposed_s, w.comm_exposed_s);
  e.step_s = mix(e.step_s, w.step_s);
  e.samples_per_s = e.ranks * double(train_.batch * train_.accumulate) / e.step_s;
  return e;
}

double CostModel::step_agreement_time(const StepContext& x) const {
  if (sync_.step_agreement_bytes <= 0) return 0;
  // The runtime's world communicator runs it: the configured algorithm, the transport's
  // small-message one (halving-doubling) beside a parameter server.
  const Algorithm a =
      algorithm_ == Algorithm::kParameterServer ? Algorithm::kHalvingDoubling : algorithm_;
  return allreduce_seconds(a, x.topo, sync_.step_agreement_bytes);
}

StepEstimate CostModel::raw(const Topology& topo) const {
  const StepContext x = context(topo);
  StepEstimate e;
  e.ranks = x.ranks;
  double compute = compute_time(x, e.compute_memory_bound);
  e.update_s = update_time(x);
  e.fwd_s = compute / 3;
  e.bwd_s = compute - e.fwd_s;

  e.memory = memory_per_gpu(x);
  e.fits = e.memory.total() <= cluster_.gpu.memory_gb * 1e9;

  const Exchange ex = gradient_exchange(x, e.bwd_s);
  e.codec_s = ex.codec_s;
  e.comm_s = ex.comm_s;
  const double idle = idle_core_share(x);
  e.comm_exposed_s = std::max(ex.exposed_s, (e.comm_s + e.codec_s) * (1 - idle));
  if (link_steals_compute(x)) {
    const double stolen = derating_.host.link_steal * std::max(0.0, e.bwd_s - ex.first_ready_s);
    e.bwd_s += stolen;
    compute += stolen;
  }

  // Gradient accumulation: the micro-batches before the last keep their gradients local; the
  // exchange overlaps only the last one's backward.
  const double k = static_cast<double>(train_.accumulate);
  compute *= k;
  e.fwd_s *= k;
  e.bwd_s = compute - e.fwd_s;

  if (x.ranks > 1) {
    // The jitter was fitted on GPU clusters; this machine's rates are measured with all its
    // workers running at once, and its own runs (experiments/validate.h) check it.
    if (!x.on_host) e.straggler_s = derating_.jitter_cv * expected_max_normal(x.ranks) * compute;
    e.overhead_s = sync_.step_overhead_s + step_agreement_time(x);
  }

  const double busy = compute + e.comm_exposed_s + e.update_s + e.straggler_s + e.overhead_s;
  e.input_s = k * input_time(x);
  e.input_exposed_s = exposed_input_time(x, e.input_s, busy, idle);

  e.step_s = busy + e.input_exposed_s;
  e.samples_per_s = e.ranks * k * x.batch / e.step_s;
  e.limiter = limiter(e, compute);
  return e;
}

}  // namespace loom::perf
