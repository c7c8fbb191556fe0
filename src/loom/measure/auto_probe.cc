#include "loom/measure/auto_probe.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>

#include "loom/compress/registry.h"
#include "loom/core/error.h"
#include "loom/core/timer.h"
#include "loom/measure/bench_harness.h"

namespace loom::measure {
namespace {

struct ComputeTimes {
  double step_s = 0;     // forward, loss and backward: the median of the repeats
  double forward_s = 0;  // forward and loss, the mean over the same repeats
};

// One training step's compute on `model`: forward, loss and backward of a batch of zeros
// (every graph takes them: pixels, token ids 0, class 0). The forward is timed apart: no
// exchange ever runs beside it, so auto's check compares a run's forward with it to tell the
// compute's own speed from what the communication thread takes beside backward.
ComputeTimes time_compute(nn::Model& model, int64_t batch, int reps) {
  int64_t numel = 1;
  for (int64_t d : model.input_shape()) numel *= d;
  const std::vector<float> x(size_t(batch * numel), 0.0f);
  const size_t outputs = size_t(batch * model.output_positions());
  const std::vector<int32_t> labels(outputs, 0);
  const std::vector<float> targets(outputs * size_t(model.num_classes()), 0.0f);
  nn::StepInfo info;
  info.training = true;
  double forward_s = 0;
  int calls = 0;
  auto step = [&] {
    Stopwatch w;
    model.forward(x.data(), batch, info);
    model.loss(labels.data(), targets.data(), 1.0f / float(batch));
    if (calls++ > 0) forward_s += w.seconds();  // the warm-up's is left out
    model.backward();
  };
  RepeatOptions r;  // one warm-up: buffers, caches
  r.reps = reps;
  ComputeTimes t;
  t.step_s = time_repeats(step, r).seconds;
  t.forward_s = calls > 1 ? forward_s / double(calls - 1) : 0;
  return t;
}

// Encode and decode GB/s (fp32 in) of `name` on n values, the median of up to `reps` after
// one warm-up, stopping after the first once `budget_s` is spent: the codec's own passes over
// gradient-like data, without `loom bench codec`'s memcpy baseline and error figures (a
// run's first seconds are the budget here). Local to the rank: no collective depends on it.
std::pair<double, double> time_codec(const std::string& name, std::span<const float> grad, int reps,
                                     double budget_s) {
  Stopwatch spent;
  const auto codec = compress::make_codec(name);
  const size_t n = grad.size();
  std::vector<uint32_t> packed((codec->encoded_bytes(n) + 3) / 4 + 1);
  const std::span<std::byte> buf(reinterpret_cast<std::byte*>(packed.data()),
                                 codec->encoded_bytes(n));
  std::vector<float> out(n);
  compress::CodecState st = codec->make_state(n, "auto probe");
  codec->encode(grad, st, buf);
  codec->decode(buf, out, compress::DecodeMode::kWrite);
  std::vector<double> enc, dec;
  for (int i = 0; i < std::max(1, reps) && (i == 0 || spent.seconds() < budget_s); ++i) {
    Stopwatch w;
    codec->encode(grad, st, buf);
    enc.push_back(w.seconds());
    w.reset();
    codec->decode(buf, out, compress::DecodeMode::kWrite);
    dec.push_back(w.seconds());
  }
  const double gb = double(n) * sizeof(float) / 1e9;
  return {gb / median(enc), gb / median(dec)};
}

}  // namespace

perf::AutoMeasurements probe_for_auto(comm::Communicator& comm, nn::Model& model,
                                      const AutoProbeOptions& o) {
  if (comm.device_memory())
    throw ConfigError(
        "codec/sync = \"auto\" measures host transports; the nccl transport is not supported "
        "yet: set codec and sync");
  Stopwatch all;
  // Values do not change the time of what follows; a constant is cheaper than the draws.
  std::fill(model.params(), model.params() + model.num_params(), 1e-3f);
  // Figures every rank contributes, averaged below: compute and its forward, one time per
  // size, then encode and decode GB/s per codec.
  std::vector<float> figures;
  const ComputeTimes own = time_compute(model, o.batch, o.compute_reps);
  figures.push_back(float(own.step_s));
  figures.push_back(float(own.forward_s));
  const double compute_cost = all.seconds();

  std::vector<size_t> sizes = o.allreduce_bytes;
  if (comm.size() > 1 && sizes.empty())
    throw InputError("auto probe: no allreduce sizes to time the link with");
  if (comm.size() > 1) {
    size_t largest = 0;
    for (size_t b : sizes) largest = std::max(largest, b);
    std::vector<float> buf(std::max<size_t>(largest / sizeof(float), 1), 1.0f);
    // One warm-up at the smallest size sets up connections and buffers; at the large sizes
    // a warm-up would cost as much as a timed call on a slow link.
    comm.barrier();
    comm.allreduce(std::span<float>(buf.data(), std::max<size_t>(sizes.front() / 4, 1)));
    // The budget for what is repeated: a share of `budget_steps` compute steps, on the mean
    // compute time of the ranks, which every rank must agree on (the repeats are collective).
    float agreed[3] = {0.0f, 0.0f, 0.0f};
    for (size_t s = 0; s < sizes.size(); ++s) {
      const std::span<float> data(buf.data(), std::max<size_t>(sizes[s] / sizeof(float), 1));
      comm.barrier();
      std::vector<double> t;
      Stopwatch first;
      comm.allreduce(data);
      t.push_back(first.seconds());
      int reps = std::max(1, o.allreduce_reps);
      if (sizes[s] == largest) {
        // The largest size is the slow one on a slow link: its repeats are taken only within
        // the budget, decided on the ranks' mean figures (compute, this first call, the time
        // spent so far), the same bits on every rank, so that all repeat alike.
        agreed[0] = figures[0];
        agreed[1] = float(t[0]);
        agreed[2] = float(all.seconds());
        comm.allreduce(std::span<float>(agreed, 3));
        const double ranks = double(comm.size());
        const double compute = agreed[0] / ranks, first_s = agreed[1] / ranks;
        const double left = o.budget_share * double(o.budget_steps) * compute - agreed[2] / ranks;
        const double more = first_s > 0 ? left / first_s : double(reps - 1);
        reps = 1 + int(std::clamp(more, 0.0, double(reps - 1)));
      }
      for (int i = 1; i < reps; ++i) {
        Stopwatch w;
        comm.allreduce(data);
        t.push_back(w.seconds());
      }
      figures.push_back(float(median(t)));
    }
  }

  const double link_cost = all.seconds() - compute_cost;
  std::vector<std::string> codecs;
  for (const auto& c : o.codecs)
    if (c != "fp32") codecs.push_back(c);
  if (!codecs.empty()) {
    // Gradient-like values: small, of both signs, no two neighbours equal.
    std::vector<float> grad(
        std::min(size_t(model.num_params()), std::max<size_t>(o.codec_values, 1)));
    for (size_t k = 0; k < grad.size(); ++k)
      grad[k] = 1e-3f * float(int((k * 2654435761u) % 2001) - 1000) / 1000.0f;
    // What is left of the budget after the compute and the link, shared by the codecs; each
    // is timed at least once after its warm-up.
    const double budget = o.budget_share * double(o.budget_steps) * figures[0];
    const double each = std::max(0.0, budget - all.seconds()) / double(codecs.size());
    for (const auto& c : codecs) {
      const auto [enc, dec] = time_codec(c, grad, o.codec_reps, each);
      figures.push_back(float(enc));
      figures.push_back(float(dec));
    }
  }
  const double codec_cost = all.seconds() - compute_cost - link_cost;
  // The parts' costs ride along, so that every rank reports the same mean.
  figures.push_back(float(compute_cost));
  figures.push_back(float(link_cost));
  figures.push_back(float(codec_cost));
  if (comm.size() > 1) {
    comm.allreduce(std::span<float>(figures));
    for (float& f : figures) f /= float(comm.size());
  }

  perf::AutoMeasurements m;
  size_t i = 0;
  m.compute_s = figures[i++];
  m.forward_s = figures[i++];
  if (comm.size() > 1) {
    std::vector<perf::AllreducePoint> points;
    for (size_t bytes : sizes) {
      perf::AllreducePoint p;
      p.bytes = double(bytes);
      p.ranks = comm.size();
      p.seconds = figures[i++];
      points.push_back(p);
    }
    m.link = perf::Calibration::fit_ring(points);
  } else {
    m.link.bytes_per_s = 1e12;  // one worker sends nothing
  }
  for (const auto& c : codecs) {
    const double enc = figures[i++], dec = figures[i++];
    if (enc > 0 && dec > 0) m.codec_gbs[c] = {enc, dec};
  }
  m.source = fmt::format(
      "at start on the {} transport, {} ranks (cost: compute {:.0f} ms, link {:.0f} ms, codecs "
      "{:.0f} ms)",
      comm.name(), comm.size(), 1e3 * figures[i], 1e3 * figures[i + 1], 1e3 * figures[i + 2]);
  // Every rank reports the same cost: the mean of theirs.
  std::vector<float> cost = {float(all.seconds())};
  if (comm.size() > 1) {
    comm.allreduce(std::span<float>(cost));
    cost[0] /= float(comm.size());
  }
  m.cost_s = cost[0];
  return m;
}

}  // namespace loom::measure
