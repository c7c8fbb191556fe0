#include "loom/measure/machine_probe.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "loom/comm/communicator.h"
#include "loom/comm/thread/thread_world.h"
#include "loom/comm/world.h"
#include "loom/core/error.h"
#include "loom/core/timer.h"
#include "loom/data/loader/loader.h"
#include "loom/data/sources/dataset.h"
#include "loom/measure/allreduce_bench.h"
#include "loom/measure/bench_harness.h"
#include "loom/measure/codec_bench.h"
#include "loom/perf/calibration.h"
#include "loom/perf/workload.h"
#include "loom/tensor/backend_registry.h"
#include "loom/tensor/cpu/gemm_probe.h"

namespace loom::measure {

using namespace loom::perf;
namespace {

// Runs fn(i) on `n` threads at once (i = 0 on the calling thread) and returns when all end.
template <class F>
void on_threads(int n, F&& fn) {
  std::vector<std::thread> others;
  for (int i = 1; i < n; ++i) others.emplace_back([&fn, i] { fn(i); });
  fn(0);
  for (auto& t : others) t.join();
}

// a += b (op "add") or memcpy on `threads` slices of two buffers of `bytes` each; returns the
// bytes read + written per second, all threads together (median of the repetitions).
double stream_rate(const std::string& op, size_t bytes, int threads, int reps) {
  const size_t n = bytes / sizeof(float);
  std::vector<float> a(n), b(n);
  on_threads(threads, [&](int t) {  // first touch by the thread that will use the slice
    const size_t lo = n * size_t(t) / size_t(threads), hi = n * size_t(t + 1) / size_t(threads);
    std::fill(a.begin() + lo, a.begin() + hi, 1.0f);
    std::fill(b.begin() + lo, b.begin() + hi, 0.5f);
  });
  const auto pass = [&] {
    on_threads(threads, [&](int t) {
      const size_t lo = n * size_t(t) / size_t(threads), hi = n * size_t(t + 1) / size_t(threads);
      float* __restrict pa = a.data();
      const float* __restrict pb = b.data();
      if (op == "add") {
        for (size_t i = lo; i < hi; ++i) pa[i] += pb[i];
      } else {
        std::memcpy(pa + lo, pb + lo, (hi - lo) * sizeof(float));
      }
    });
  };
  RepeatOptions ro;  // one warm-up
  ro.reps = reps;
  const double seconds = time_repeats(pass, ro).seconds;
  const double traffic = double(n * sizeof(float)) * (op == "add" ? 3 : 2);
  return traffic / seconds;
}

// One MLP step's layer ops between GEMMs on the CPU backend, per worker: the buffers and
// the ops of Linear + ReLU + Dropout (hidden layers) and the loss (output layer).
struct LayerOps {
  std::vector<int64_t> widths;
  int64_t batch;
  float p;
  std::vector<std::vector<float>> y, dy, dx, bias, dbias;
  std::vector<std::vector<uint8_t>> mask;
  std::vector<int32_t> labels;

  LayerOps(const std::vector<int64_t>& w, int64_t b, double dropout)
      : widths(w), batch(b), p(float(dropout)), labels(size_t(b)) {
    for (size_t l = 1; l < widths.size(); ++l) {
      const size_t n = size_t(batch * widths[l]);
      y.emplace_back(n, 0.25f);
      dy.emplace_back(n, 0.01f);
      dx.emplace_back(n, 0.0f);
      mask.emplace_back(n, uint8_t(1));
      bias.emplace_back(size_t(widths[l]), 0.1f);
      dbias.emplace_back(size_t(widths[l]), 0.0f);
    }
    for (int64_t i = 0; i < batch; ++i) labels[size_t(i)] = int32_t(i % widths.back());
  }

  void run(Backend& be, uint64_t key) {
    const size_t last = widths.size() - 2;
    for (size_t l = 0; l <= last; ++l) {  // forward
      const int64_t h = widths[l + 1], n = batch * h;
      be.add_bias(y[l].data(), bias[l].data(), batch, h);
      if (l == last) break;
      be.relu_forward(y[l].data(), y[l].data(), n);
      if (p > 0) be.dropout_forward(y[l].data(), dx[l].data(), mask[l].data(), n, p, key, 0);
    }
    int64_t correct = 0;
    be.softmax_xent(y[last].data(), labels.data(), batch, widths.back(), 1.0f / float(batch),
                    dy[last].data(), &correct);
    for (size_t l = last + 1; l-- > 0;) {  // backward
      const int64_t h = widths[l + 1], n = batch * h;
      if (l != last) {
        if (p > 0) be.dropout_backward(dy[l].data(), mask[l].data(), dx[l].data(), n, p);
        be.relu_backward(y[l].data(), dx[l].data(), dy[l].data(), n);
      }
      be.sum_rows(dy[l].data(), dbias[l].data(), batch, h);
    }
  }
};

// Bytes/s of the layer ops with `threads` workers running them at once (aggregate).
double elementwise_rate(const ProbeOptions& o, int threads, int reps) {
  std::vector<double> widths(o.widths.begin(), o.widths.end());
  const double bytes = double(o.batch) * mlp_elementwise_bytes(widths, o.dropout);
  std::vector<double> per(static_cast<size_t>(threads));
  on_threads(threads, [&](int t) {
    Backend& be = cpu_backend();
    be.set_intra_op_threads(1);
    LayerOps ops(o.widths, o.batch, o.dropout);
    uint64_t seed = 0;  // a new dropout mask each call
    RepeatOptions ro;
    ro.warmup = 2;
    ro.reps = reps;
    per[size_t(t)] = time_repeats([&] { ops.run(be, ++seed); }, ro).seconds;
  });
  double rate = 0;
  for (double s : per) rate += bytes / s;
  return rate;
}

// One worker's GEMM FLOP/s on the step's shapes with `workers` workers at once.
double gemm_rate(const std::vector<cpu::GemmShape>& shapes, int workers, int threads, int reps) {
  const cpu::GemmLibrary lib = cpu::gemm_library();
  std::vector<double> gflops(static_cast<size_t>(workers));
  on_threads(workers, [&](int t) {
    cpu_backend().set_intra_op_threads(threads);
    gflops[size_t(t)] = cpu::probe_gemm(shapes, lib, reps).gflops();
    cpu_backend().set_intra_op_threads(1);
  });
  double sum = 0;
  for (double g : gflops) sum += g;
  return sum / workers;
}

double loader_rate(const ProbeOptions& o, int64_t batches) {
  data::Normalisation norm;
  const data::Dataset train = data::load_fashion_mnist(
      o.data_dir.empty() ? data::kDefaultFashionMnistDir : o.data_dir, true, std::nullopt, &norm);
  data::LoaderOptions lo;
  lo.global_batch = o.batch;
  data::Loader loader(train, lo);
  loader.start_epoch(0);
  data::Batch b;
  loader.next(b);  // the first batch fills the queue
  Stopwatch w;
  int64_t samples = 0;
  for (int64_t i = 0; i < batches && loader.next(b); ++i) samples += b.size;
  return double(samples) / w.seconds();
}

}  // namespace

// Runs fn() while `workers` threads run the step's GEMMs in a loop (a step's compute).
template <class F>
void beside_busy_compute(const ProbeOptions& o, int workers, F&& fn) {
  const auto shapes = cpu::mlp_step_gemms(o.widths, o.batch);
  std::atomic<bool> stop{false};
  std::vector<std::thread> compute;
  for (int w = 0; w < workers; ++w)
    compute.emplace_back([&] {
      cpu_backend().set_intra_op_threads(1);
      while (!stop.load()) cpu::probe_gemm(shapes, cpu::gemm_library(), 1);
    });
  try {
    fn();
  } catch (...) {
    stop = true;
    for (auto& t : compute) t.join();
    throw;
  }
  stop = true;
  for (auto& t : compute) t.join();
}

// Runs fn() while `workers` threads run the step's GEMMs shape by shape, and returns the
// fraction of their GEMM rate fn took away (the rate is first measured for 0.3 s without fn).
template <class F>
double steal_beside_compute(const ProbeOptions& o, int workers, F&& fn) {
  const auto shapes = cpu::mlp_step_gemms(o.widths, o.batch);
  // -1: warming up (the first pass builds the library's kernels), 0: alone, 1: beside fn,
  // 2: stop.
  std::atomic<int> phase{-1}, warm{0};
  std::vector<double> alone(size_t(workers), 0), beside(size_t(workers), 0);
  std::vector<std::thread> compute;
  for (int w = 0; w < workers; ++w)
    compute.emplace_back([&, w] {
      cpu_backend().set_intra_op_threads(1);
      for (bool first = true;; first = false) {
        for (const auto& sh : shapes) {
          const int p = phase.load();
          if (p == 2) return;
          cpu::probe_gemm({sh}, cpu::gemm_library(), 1);  // a warm-up pass and one timed
          if (p >= 0) (p == 0 ? alone : beside)[size_t(w)] += 2 * sh.flops();
        }
        if (first) warm.fetch_add(1);
      }
    });
  auto stop = [&] {
    phase = 2;
    for (auto& t : compute) t.join();
  };
  double alone_s = 0, beside_s = 0;
  try {
    while (warm.load() < workers) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    phase = 0;
    Stopwatch w0;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    alone_s = w0.seconds();
    phase = 1;
    Stopwatch w1;
    fn();
    beside_s = w1.seconds();
  } catch (...) {
    stop();
    throw;
  }
  stop();
  double a = 0, b = 0;
  for (int w = 0; w < workers; ++w) a += alone[size_t(w)], b += beside[size_t(w)];
  if (!(a > 0) || !(alone_s > 0) || !(beside_s > 0)) return 0;
  return std::clamp(1.0 - (b / beside_s) / (a / alone_s), 0.0, 1.0);
}

// Median seconds of `reps` allreduces of `bytes` on `c` (after one warm-up).
double time_allreduce(comm::Communicator& c, size_t bytes, int reps) {
  std::vector<float> v(bytes / sizeof(float), 1.0f);
  RepeatOptions ro;  // one warm-up
  ro.reps = reps;
  return time_repeats([&] { c.allreduce(std::span<float>(v)); }, ro).seconds;
}

// The thread transport's allreduce among `workers` ranks (the workers' communication
// threads) at `sizes`, while `workers` other threads run the step's GEMMs; one busy line per
// size, each with the GEMM rate share the exchange took.
std::vector<nlohmann::json> busy_thread_exchange(const ProbeOptions& o, int workers,
                                                 const std::vector<size_t>& sizes) {
  std::vector<double> seconds(sizes.size());
  const double steal = steal_beside_compute(o, workers, [&] {
    comm::ThreadWorld world(workers);
    world.run([&](comm::Communicator& c) {
      for (size_t i = 0; i < sizes.size(); ++i) {
        const double t = time_allreduce(c, sizes[i], o.quick ? 5 : 25);
        if (c.rank() == 0) seconds[i] = t;
      }
    });
  });
  std::vector<nlohmann::json> out;
  for (size_t i = 0; i < sizes.size(); ++i)
    out.push_back(
        busy_allreduce_line("thread", "native", workers, sizes[i], seconds[i] * 1e6, steal));
  return out;
}

// The sizes the busy exchange is timed at: a small message (its alpha) and the run's bucket.
std::vector<size_t> busy_sizes(const ProbeOptions& o) {
  return {size_t(64) << 10, size_t(std::max<int64_t>(o.bucket_bytes, 256 << 10))};
}

HostRates probe_run_rates(const ProbeOptions& o, int workers, int threads,
                          const std::string& codec) {
  HostRates r;
  r.cores = int(std::max(1u, std::thread::hardware_concurrency()));
  const int busy = workers * threads;
  r.gemm_flops[{workers, threads}] =
      gemm_rate(cpu::mlp_step_gemms(o.widths, o.batch), workers, threads, 5) * 1e9;
  r.stream_bytes[busy] = stream_rate("add", 32 << 20, busy, 3);
  r.elementwise_bytes[busy] = elementwise_rate(o, busy, 10);
  if (workers > 1) {
    std::string lines;
    for (const auto& j : busy_thread_exchange(o, workers, busy_sizes(o))) lines += j.dump() + "\n";
    r.busy = parse_calibration(lines, "busy exchange").host.busy;
  }
  if (workers > 1 && codec != "fp32") {
    measure::CodecBenchOptions cb;
    cb.n = 0;
    for (size_t l = 0; l + 1 < o.widths.size(); ++l)
      cb.n += size_t(o.widths[l] * o.widths[l + 1] + o.widths[l + 1]);
    cb.codecs = {codec};
    cb.min_seconds = 0.05;
    beside_busy_compute(o, workers, [&] {
      measure::run_codec_bench(cb, [&](const measure::CodecBenchRow& row) {
        r.busy_codec_gbs[row.codec] = {row.encode_gbs, row.decode_gbs};
      });
    });
  }
  return r;
}

void probe_machine(const ProbeOptions& o, comm::World* mpi,
                   const std::function<void(const nlohmann::json&)>& emit) {
  if (o.widths.size() < 2 || o.batch < 1)
    throw InputError(fmt::format("calibrate: need at least two layer widths and batch >= 1"));
  const int reps = o.quick ? 3 : 15;
  const bool lead = mpi == nullptr || mpi->local(0).rank() == 0;

  // Allreduce first: under MPI every rank takes part, then the others leave.
  measure::AllreduceBenchOptions ab;
  ab.min_bytes = 64 << 10;
  ab.max_bytes = o.quick ? (1 << 20) : (16 << 20);
  ab.factor = 4;
  ab.budget_s = o.quick ? 0.02 : 0.15;
  ab.threads = 2;
  ab.mpi = mpi != nullptr;
  measure::run_allreduce_bench(mpi, ab, [&](const measure::AllreduceBenchRow& r) {
    // The collectives the training loop calls: each transport's own ("native": on MPI the
    // node's shared memory when every rank is on this machine, else the ring).
    if (r.algo != "native") return;
    emit(allreduce_line(r.transport, r.algo, r.ranks, r.bytes, r.lat_us));
  });
  if (mpi != nullptr) {
    // The same beside busy compute: every rank runs one compute thread next to its exchange.
    comm::Communicator& c = mpi->local(0);
    std::vector<double> seconds;
    const auto sizes = busy_sizes(o);
    const double steal = steal_beside_compute(o, 1, [&] {
      for (size_t bytes : sizes) seconds.push_back(time_allreduce(c, bytes, o.quick ? 5 : 25));
    });
    if (lead)
      for (size_t i = 0; i < sizes.size(); ++i)
        emit(busy_allreduce_line("mpi", "native", c.size(), sizes[i], seconds[i] * 1e6, steal));
  }
  if (!lead) return;
  for (const auto& j : busy_thread_exchange(o, 2, busy_sizes(o))) emit(j);

  emit(host_line(int(std::max(1u, std::thread::hardware_concurrency()))));
  const auto shapes = cpu::mlp_step_gemms(o.widths, o.batch);
  for (auto [workers, threads] : {std::pair{1, 1}, std::pair{1, 2}, std::pair{2, 1}})
    emit(gemm_line(workers, threads, o.widths, o.batch, gemm_rate(shapes, workers, threads, reps),
                   cpu::gemm_library_name(cpu::gemm_library())));
  const size_t big = o.quick ? (16 << 20) : (64 << 20);
  for (const char* op : {"add", "memcpy"})
    for (int threads : {1, 2})
      emit(membw_line(op, threads, big, stream_rate(op, big, threads, o.quick ? 2 : 5) / 1e9));
  for (int threads : {1, 2})
    emit(
        elementwise_line(threads, o.widths, o.batch, elementwise_rate(o, threads, reps * 4) / 1e9));

  measure::CodecBenchOptions cb;
  size_t params = 0;
  for (size_t l = 0; l + 1 < o.widths.size(); ++l)
    params += size_t(o.widths[l] * o.widths[l + 1] + o.widths[l + 1]);
  cb.n = params;
  cb.codecs = o.codecs;
  cb.min_seconds = o.quick ? 0.02 : 0.1;
  measure::run_codec_bench(cb, [&](const measure::CodecBenchRow& r) {
    emit(codec_line(r.codec, r.n, r.encode_gbs, r.decode_gbs));
  });
  const double bytes_per_sample = double(o.widths.front()) + 1;  // uint8 pixels + label
  emit(loader_line(loader_rate(o, o.quick ? 50 : 300), bytes_per_sample));
}

}  // namespace loom::measure
