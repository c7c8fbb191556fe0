#include "loom/perf/parallelism_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace loom::perf {
namespace {

constexpr double kInt8Wire = (1.0 + 4.0 / 512.0) / 4.0;  // int8 codec, block 512

// One collective's time: alpha-beta with 2 (N-1) messages in sequence.
double link_seconds(const LinkSpec& l, double bytes, int n) {
  return bytes / l.bytes_per_s() + 2.0 * (n - 1) * l.alpha_s();
}

bool is_dense(const LayerShape& l) {
  return l.kind == LayerKind::kDense;
}

ParallelismEstimate estimate(const ModelShape& model, const std::string& mode,
                             const std::string& act, const ParallelismSetup& s) {
  const std::vector<LayerShape>& L = model.layers;
  const int n = s.workers;
  const double b = double(s.batch), G = b * n, wire = act == "int8" ? kInt8Wire : 1.0;
  const double ring = 2.0 * (n - 1) / n;
  ParallelismEstimate e;
  e.mode = mode;
  e.activations = mode == "data" ? "-" : act;
  double flops = 0, bytes = 0, act_fp32 = 0, bwd_flops = 0;
  int collectives = 0;
  if (mode == "data") {
    double params = 0;
    for (const auto& l : L) flops += 3 * l.flops * b, params += l.params;
    bwd_flops = flops * 2 / 3;
    bytes = ring * 4 * params;
    e.compute_s = flops / s.flops_per_s;
    e.comm_s = n > 1 ? link_seconds(s.link, bytes, n) : 0;
    e.exposed_s = std::max(0.0, e.comm_s - bwd_flops / s.flops_per_s);
  } else {
    size_t start = 0;  // the block's first layer
    if (mode == "hybrid")
      while (start < L.size() && !is_dense(L[start])) ++start;
    double dp_params = 0;
    for (size_t i = 0; i < start; ++i) flops += 3 * L[i].flops * b, dp_params += L[i].params;
    int64_t w_in = model.input;
    for (size_t i = 0; i < start; ++i)
      if (L[i].out > 0) w_in = L[i].out;
    if (start > 0 && start < L.size()) w_in = L[start].in;  // the first dense layer
    // Dense roles: pairs column -> row, a last unpaired one replicated.
    std::vector<size_t> dense;
    for (size_t i = start; i < L.size(); ++i)
      if (is_dense(L[i])) dense.push_back(i);
    bool params_seen = false;
    for (size_t i = start; i < L.size(); ++i) {
      const auto& l = L[i];
      if (!is_dense(l)) {
        flops += 3 * l.flops * G;  // replicated on the gathered batch
        params_seen = params_seen || l.params > 0;
        continue;
      }
      const size_t k = size_t(std::find(dense.begin(), dense.end(), i) - dense.begin());
      const bool row = k % 2 == 1;
      const bool replicated = !row && k + 1 == dense.size();
      if (replicated) {
        flops += 3 * l.flops * G;
      } else {
        flops += 3 * l.flops * G / n;
        if (row) {
          bytes += ring * G * l.out * 4 * wire, act_fp32 += G * l.out * 4, ++collectives;
        } else if (params_seen) {
          bytes += ring * G * l.in * 4 * wire, act_fp32 += G * l.in * 4, ++collectives;
        }
      }
      params_seen = true;
    }
    bytes += (n - 1) * b * w_in * 4 * wire + (n - 1) * b * model.classes * 4;  // gathers
    act_fp32 += G * w_in * 4;
    collectives += 2;
    if (dp_params > 0) {  // hybrid: reduce-scatter at the block, allreduce of conv gradients
      bytes += (n - 1) * b * w_in * 4 * wire + ring * 4 * dp_params;
      act_fp32 += G * w_in * 4;
      collectives += 2;
    }
    e.compute_s = flops / s.flops_per_s;
    if (n > 1) {
      e.comm_s = bytes / s.link.bytes_per_s() + 2.0 * (n - 1) * collectives * s.link.alpha_s();
      if (act == "int8") e.codec_s = act_fp32 / (s.codec_gbs * 1e9);
    }
    e.exposed_s = e.comm_s + e.codec_s;
  }
  e.bytes_per_step = n > 1 ? bytes : 0;
  e.step_s = e.compute_s + e.exposed_s;
  e.samples_per_s = G / e.step_s;
  return e;
}

}  // namespace

std::vector<ParallelismEstimate> compare_parallelism(const ModelShape& model,
                                                     const ParallelismSetup& s) {
  const auto& L = model.layers;
  const auto first_dense = std::find_if(L.begin(), L.end(), is_dense);
  const bool params_before_dense =
      std::any_of(L.begin(), first_dense, [](const LayerShape& l) { return l.params > 0; });
  std::vector<ParallelismEstimate> out;
  out.push_back(estimate(model, "data", "fp32", s));
  for (const char* act : {"fp32", "int8"}) {
    out.push_back(estimate(model, "model", act, s));
    if (params_before_dense) out.push_back(estimate(model, "hybrid", act, s));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.samples_per_s > b.samples_per_s; });
  return out;
}

std::string parallelism_table(const std::vector<ParallelismEstimate>& e,
                              const ParallelismSetup& s) {
  std::string t = fmt::format(
      "parallelism: {} workers x batch {}, {:.0f} GFLOP/s each, link {} ({:.3f} GB/s, {:.1f} "
      "us)\n  {:<8} {:<5} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
      s.workers, s.batch, s.flops_per_s / 1e9, s.link.name, s.link.bytes_per_s() / 1e9,
      s.link.latency_us, "mode", "acts", "MB/step", "compute", "comm", "codec", "step",
      "samples/s");
  for (const auto& x : e)
    t += fmt::format("  {:<8} {:<5} {:>12.2f} {:>10} {:>10} {:>10} {:>10} {:>10.0f}\n", x.mode,
                     x.activations, x.bytes_per_step / 1e6,
                     fmt::format("{:.1f} ms", 1e3 * x.compute_s),
                     fmt::format("{:.1f} ms", 1e3 * x.exposed_s - 1e3 * x.codec_s),
                     fmt::format("{:.1f} ms", 1e3 * x.codec_s),
                     fmt::format("{:.1f} ms", 1e3 * x.step_s), x.samples_per_s);
  if (!e.empty())
    t += fmt::format(
        "  fastest: {}{}\n", e.front().mode,
        e.front().mode == "data" ? "" : " with " + e.front().activations + " activations");
  return t;
}

std::string parallelism_json(const std::vector<ParallelismEstimate>& e, const ParallelismSetup& s) {
  std::string out;
  for (const auto& x : e)
    out += nlohmann::json{{"parallelism", x.mode},
                          {"activations", x.activations},
                          {"workers", s.workers},
                          {"batch", s.batch},
                          {"link", s.link.name},
                          {"bytes_per_step", x.bytes_per_step},
                          {"compute_s", x.compute_s},
                          {"exposed_comm_s", x.exposed_s},
                          {"codec_s", x.codec_s},
                          {"step_s", x.step_s},
                          {"samples_per_s", x.samples_per_s}}
               .dump() +
           "\n";
  return out;
}

}  // namespace loom::perf
