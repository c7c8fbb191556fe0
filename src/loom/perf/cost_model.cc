#include "loom/perf/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "loom/core/error.h"

namespace loom::perf {

std::string format_seconds(double s) {
  if (s >= 1) return fmt::format("{:.2f} s", s);
  if (s >= 1e-3) return fmt::format("{:.1f} ms", s * 1e3);
  return fmt::format("{:.0f} us", s * 1e6);
}

CostModel::CostModel(Workload w, Cluster c, SyncSpec s, TrainSpec t, Derating d)
    : w_(std::move(w)),
      c_(std::move(c)),
      s_(std::move(s)),
      t_(std::move(t)),
      d_(std::move(d)),
      codec_(codec_model(s_.codec)),
      algo_(algorithm_from_name(s_.algorithm)) {
  if (t_.batch <= 0) throw InputError(fmt::format("batch must be > 0, got {}", t_.batch));
  if (t_.precision != "fp32" && t_.precision != "mixed")
    throw InputError(fmt::format("precision must be fp32 or mixed, got '{}'", t_.precision));
  if (t_.optimizer != "sgd" && t_.optimizer != "momentum" && t_.optimizer != "adam")
    throw InputError(
        fmt::format("optimizer must be sgd, momentum or adam, got '{}'", t_.optimizer));
  if (s_.tau < 1) throw InputError(fmt::format("tau must be >= 1, got {}", s_.tau));
  if (s_.bucket_mb <= 0)
    throw InputError(fmt::format("bucket size must be > 0 MB, got {}", s_.bucket_mb));
  if (c_.topo.nodes < 1 || c_.topo.gpus_per_node < 1)
    throw InputError(fmt::format("need at least one node and one GPU per node, got {} x {}",
                                 c_.topo.nodes, c_.topo.gpus_per_node));
}

StepEstimate CostModel::estimate() const {
  return estimate_at(c_.topo.nodes, c_.topo.gpus_per_node);
}

StepEstimate CostModel::estimate_at(int nodes, int gpus_per_node) const {
  Topology one = c_.topo;
  one.nodes = 1;
  one.gpus_per_node = 1;
  Topology t = c_.topo;
  t.nodes = nodes;
  t.gpus_per_node = gpus_per_node;
  StepEstimate base = raw(one);
  StepEstimate e = raw(t);
  e.speedup = e.ranks * base.step_s / e.step_s;
  e.efficiency = e.speedup / e.ranks;
  return e;
}

StepEstimate CostModel::raw(const Topology& topo) const {
  StepEstimate e;
  e.ranks = topo.ranks();
  const GpuSpec& g = c_.gpu;
  const bool mixed = t_.precision == "mixed";
  const double b = static_cast<double>(t_.batch);
  const double P = w_.params();
  const double peak = (mixed && g.tensor_tflops > 0 ? g.tensor_tflops : g.fp32_tflops) * 1e12;
  const double flops_rate = peak * d_.compute;
  const double mem_rate = g.mem_bw_gbs * 1e9 * d_.memory;
  const double act_bytes = w_.activation_bytes * (mixed ? 0.5 : 1.0);
  const double weight_bytes = P * (mixed ? 2.0 : 4.0);

  // Optimizer update, memory-bound: bytes touched per parameter (read w, g, state; write w,
  // state).
  const double upd_bytes = t_.optimizer == "sgd" ? 12 : t_.optimizer == "momentum" ? 20 : 28;
  const HostRates& host = d_.host;
  const bool on_host = host.valid();
  const int threads = std::max(1, t_.threads);
  double compute = 0;
  if (on_host) {
    // This CPU, part by part at measured rates (host_model.h): the step's GEMMs at the GEMM
    // rate of its own shapes, the layers between them at the elementwise rate.
    const double gemm_s = b * w_.step_flops() / host.gemm_rate(e.ranks, threads);
    const auto& ew = host.elementwise_bytes.empty() ? host.stream_bytes : host.elementwise_bytes;
    const double ew_s = b * w_.elementwise_bytes / host.share(ew, e.ranks, threads);
    compute = gemm_s + ew_s;
    e.compute_memory_bound = ew_s > gemm_s;
    e.update_s = P * upd_bytes / host.share(host.stream_bytes, e.ranks, threads);
    if (s_.shard_optimizer && codec_.name == "fp32" && e.ranks > 1) e.update_s /= e.ranks;
  } else {
    // Compute: roofline of the whole step. Traffic: activations written in forward and read
    // twice in backward; weights read in forward and backward, gradients written.
    double t_flops = b * w_.train_flops() / flops_rate;
    double t_mem = (3 * b * act_bytes + 3 * weight_bytes) / mem_rate;
    compute = std::max(t_flops, t_mem);
    e.compute_memory_bound = t_mem > t_flops;
    e.update_s = P * upd_bytes / mem_rate;
  }
  e.fwd_s = compute / 3;
  e.bwd_s = compute - e.fwd_s;

  // Memory on one GPU.
  MemoryBreakdown& m = e.memory;
  m.weights = mixed ? 6 * P : 4 * P;  // fp16 copy + fp32 master
  m.grads = mixed ? 2 * P : 4 * P;
  m.optimizer = t_.optimizer == "sgd" ? 0 : t_.optimizer == "momentum" ? 4 * P : 8 * P;
  m.activations = b * act_bytes;
  if (e.ranks > 1 || s_.bmuf) {
    m.codec = P * 4 * codec_.ratio() + (codec_.error_feedback ? 4 * P : 0);
    if (s_.bmuf) m.codec += 8 * P;  // block start weights and block momentum
  }
  m.reserve = 0.5e9;  // CUDA context, library workspaces (estimate)
  e.fits = m.total() <= g.memory_gb * 1e9;

  // Communication.
  auto codec_seconds = [&](double fp32_bytes) {
    if (auto it = d_.codec_enc_dec_gbs.find(codec_.name); it != d_.codec_enc_dec_gbs.end()) {
      // Stripe exchange per rank: encode the gradient, re-encode its own 1/n stripe of the
      // sum; decode n stripes of 1/n as owner and the n gathered stripes (compressed
      // allreduce, compress/compressed_allreduce.h). Summable codecs: encode + decode once.
      const double n = e.ranks;
      const bool stripes = codec_.aggregation == Aggregation::kStripeExchange;
      const double enc = stripes ? 1 + 1 / n : 1, dec = stripes ? 2 : 1;
      return fp32_bytes * (enc / (it->second.first * 1e9) + dec / (it->second.second * 1e9));
    }
    if (auto it = d_.codec_gbs.find(codec_.name); it != d_.codec_gbs.end())
      return fp32_bytes / (it->second * 1e9);
    return codec_.memory_passes * fp32_bytes / mem_rate +
           codec_.extra_flops_per_element * (fp32_bytes / 4) / flops_rate;
  };
  auto comm_seconds = [&](double fp32_bytes) {
    double wire = fp32_bytes * codec_.ratio();
    if (codec_.aggregation == Aggregation::kAllgather) return allgather_seconds(topo, wire);
    double t = 0;
    for (int i = 0; i < codec_.collectives; ++i)
      t += allreduce_seconds(algo_, topo, wire / codec_.collectives);
    return t;
  };
  double exposed = 0;
  double first_ready = e.bwd_s;  // when the first bucket goes to the communication thread
  if (e.ranks > 1) {
    if (s_.bmuf) {
      // One allreduce of the whole model delta per block of tau local steps, after the
      // block: nothing overlaps, but it is shared by tau steps.
      double bytes = 4 * P;
      e.codec_s = codec_seconds(bytes) / s_.tau;
      e.comm_s = comm_seconds(bytes) / s_.tau;
      exposed = e.codec_s + e.comm_s;
    } else {
      // Buckets: walk the layers backward; a bucket is sent once bucket_mb of gradients are
      // ready; big layers split into several buckets ready at the same time.
      const double bucket = s_.bucket_mb * 1e6;
      const double total_flops = std::max(w_.fwd_flops(), 1.0);
      double clock = 0, link_free = 0, pending = 0;
      auto send = [&](double bytes, double ready) {
        first_ready = std::min(first_ready, ready);
        double c = codec_seconds(bytes), x = comm_seconds(bytes);
        e.codec_s += c;
        e.comm_s += x;
        double start = s_.overlap ? std::max(ready, link_free) : std::max(e.bwd_s, link_free);
        link_free = start + c + x;
      };
      for (auto it = w_.layers.rbegin(); it != w_.layers.rend(); ++it) {
        clock += e.bwd_s * it->fwd_flops / total_flops;
        pending += 4 * it->params;
        while (pending >= bucket) {
          send(bucket, clock);
          pending -= bucket;
        }
      }
      if (pending > 0) send(pending, e.bwd_s);
      exposed = std::max(0.0, link_free - e.bwd_s);
    }
  }
  // On a CPU host the communication thread and the loader need cores too: overlap hides
  // their work only on cores the workers' compute threads leave idle (hide = idle cores per
  // rank, at most 1); the rest adds to the step.
  const double hide =
      on_host ? std::clamp(double(host.cores - e.ranks * threads) / e.ranks, 0.0, 1.0) : 1.0;
  exposed = std::max(exposed, (e.comm_s + e.codec_s) * (1 - hide));
  if (on_host && s_.overlap && host.link_steal > 0 && e.ranks > 1 && !s_.bmuf) {
    // The communication thread beside the compute threads (host_model.h BusyLink): from the
    // first bucket on, it runs (or polls for its peer) until the exchange is done, taking
    // `steal` of the compute threads' rate for the rest of backward. Without overlap the
    // exchange starts after backward and nothing runs beside the compute.
    const double stolen = host.link_steal * std::max(0.0, e.bwd_s - first_ready);
    e.bwd_s += stolen;
    compute += stolen;
  }
  e.comm_exposed_s = exposed;

  // Input: the node's storage reads for all its GPUs; prefetch hides it behind the step.
  double busy = compute + exposed + e.update_s;
  e.input_s = topo.gpus_per_node * b * w_.input_bytes / (c_.storage.read_mbs * 1e6);
  e.input_exposed_s = t_.prefetch ? std::max(0.0, e.input_s - busy) : e.input_s;
  // On a host each worker's loader thread does its own share of that work.
  if (on_host)
    e.input_exposed_s = std::max(e.input_exposed_s, e.input_s / topo.gpus_per_node * (1 - hide));

  e.step_s = busy + e.input_exposed_s;
  e.samples_per_s = e.ranks * b / e.step_s;

  if (!e.fits) {
    e.limiter = "memory";
  } else {
    double link = exposed, input = e.input_exposed_s;
    if (link >= compute && link >= input)
      e.limiter = "link";
    else if (input >= compute)
      e.limiter = "input";
    else
      e.limiter = e.compute_memory_bound ? "memory bandwidth" : "compute";
  }
  return e;
}

}  // namespace loom::perf
