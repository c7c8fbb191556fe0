#include "loom/measure/loader_bench.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "loom/core/error.h"
#include "loom/core/rng.h"
#include "loom/core/timer.h"
#include "loom/data/formats/convert.h"
#include "loom/data/formats/shard_writer.h"
#include "loom/data/loader/loader.h"
#include "loom/data/loader/throttle.h"
#include "loom/data/sources/shard_source.h"

namespace loom::measure {

// The loader and the formats it benchmarks.
using namespace loom::data;

namespace {

namespace fs = std::filesystem;

// A synthetic record: a label and 28 x 28 uint8 pixels.
constexpr int64_t kRecordBytes = 4 + 784;

// A synthetic uint8 image set (Fashion-MNIST-sized records, 788 bytes), written as a shard.
void write_synthetic(const std::string& path, int64_t count) {
  ShardWriter w(path, {ShardDtype::kUint8, {1, 28, 28}, 10, count, 0});
  std::vector<uint8_t> px(784);
  Rng rng(1, 0, RngPurpose::kSynthetic);
  for (int64_t i = 0; i < count; ++i) {
    for (auto& p : px) p = uint8_t(rng.next_u32());
    w.append(int32_t(i % 10), px.data());
  }
  w.finish();
}

// Stands in for a model's forward and backward: touches the batch, then spins for `seconds`.
float compute(const Batch& b, int64_t numel, double seconds) {
  Stopwatch sw;
  float acc = 0;
  for (int64_t i = 0; i < b.size * numel; i += 16) acc += b.x[i];
  while (sw.seconds() < seconds) acc = acc * 0.999f + 1.0f;
  return acc;
}

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

struct EpochTimes {
  double wall = 0, wait = 0, cpu = 0;  // cpu: this thread's CPU time (K = 0: all loader work)
  int64_t steps = 0;
};

EpochTimes run_epoch(Loader& l, int64_t epoch, double compute_s, int64_t max_steps) {
  EpochTimes t;
  l.start_epoch(epoch);
  Batch b;
  Stopwatch sw;
  const double cpu0 = thread_cpu_seconds();
  volatile float sink = 0;
  const int64_t numel = l.source().sample_numel();
  while (t.steps < max_steps && l.next(b)) {
    t.wait += b.wait_seconds;
    sink = sink + compute(b, numel, compute_s);
    ++t.steps;
  }
  t.wall = sw.seconds();
  t.cpu = thread_cpu_seconds() - cpu0;
  return t;
}

// 1. Peak RSS while training an epoch from a set 4x larger than the memory cap (first, in a
//    fresh child, so nothing this process holds counts). Returns the set's path.
std::string peak_rss_figure(const LoaderBenchOptions& o, const fs::path& dir, BenchOutput& out) {
  const int64_t cap = int64_t(o.mem_cap_mb * 1e6);
  const int64_t count = 4 * cap / kRecordBytes;
  const std::string path = (dir / "big.shard").string();
  write_synthetic(path, count);
  const double set_mb = double(count * kRecordBytes) / 1e6;
  ::pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 0;
    try {
      auto src = std::make_shared<ShardSource>(path);
      // A window of ~1/8 of the cap: the loader touches about two windows at a time.
      Loader l(src, {.global_batch = 128,
                     .seed = 1,
                     .prefetch = 4,
                     .shuffle_window = cap / kRecordBytes / 8});
      EpochTimes t = run_epoch(l, 0, 0.0, INT64_MAX);
      rc = t.steps == l.steps_per_epoch() ? 0 : 3;
    } catch (...) {
      rc = 4;
    }
    ::_exit(rc);
  }
  int status = 0;
  struct rusage ru;
  ::wait4(pid, &status, 0, &ru);
  const double peak_mb = double(ru.ru_maxrss) * 1024 / 1e6;
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  out.line(fmt::format(
      "{:<44} {:>10.1f} MB (set {:.1f} MB = 4x cap {:.1f} MB){}",
      "peak RSS, one epoch, windowed shuffle", peak_mb, set_mb, o.mem_cap_mb,
      ok ? (peak_mb <= o.mem_cap_mb ? "  under the cap" : "  OVER THE CAP") : "  EPOCH FAILED"));
  out.json({{"bench", "loader"},
            {"figure", "peak_rss"},
            {"peak_rss_mb", peak_mb},
            {"set_mb", set_mb},
            {"cap_mb", o.mem_cap_mb},
            {"under_cap", ok && peak_mb <= o.mem_cap_mb}});
  return path;
}

// 2. Throughput from page-cached shards (the set `path`, just written), one thread (K = 0).
void shard_throughput_figures(const LoaderBenchOptions& o, const std::string& path,
                              BenchOutput& out) {
  auto src = std::make_shared<ShardSource>(path, ShardOpenOptions{ShardVerify::kNone, {}});
  const int64_t window = int64_t(o.mem_cap_mb * 1e6) / kRecordBytes / 8;
  for (int mode = 0; mode < 3; ++mode) {
    const char* name[3] = {"in order", "windowed shuffle", "full shuffle"};
    Loader l(src, {.global_batch = 256,
                   .seed = 2,
                   .shuffle = mode > 0,
                   .prefetch = 0,
                   .shuffle_window = mode == 1 ? window : 0});
    run_epoch(l, 0, 0.0, INT64_MAX);  // warm: map every page, touch the buffers
    EpochTimes t = run_epoch(l, 1, 0.0, INT64_MAX);
    const double bytes = double(t.steps * 256 * kRecordBytes);
    const double in_gbs = bytes / t.wall / 1e9;
    const double cpu_gbs = bytes / t.cpu / 1e9;  // per second of this thread's CPU time
    const double out_gbs = double(t.steps * 256 * (784 * 4 + 4)) / t.wall / 1e9;
    out.line(fmt::format(
        "{:<52} {:>6.2f} GB/s read ({:.2f} GB/s per CPU-second; {:.2f} GB/s floats out)",
        fmt::format("loader, page-cached shards, 1 thread, {}", name[mode]), in_gbs, cpu_gbs,
        out_gbs));
    out.json({{"bench", "loader"},
              {"figure", "shard_throughput"},
              {"order", name[mode]},
              {"threads", 1},
              {"read_GBps", in_gbs},
              {"read_GBps_per_cpu_s", cpu_gbs},
              {"out_GBps", out_gbs}});
  }
}

// 3. Stall share of step time on a throttled source, K = 0 vs K = 4. The stand-in model
//    consumes data at `consume_share` of the disk's rate, so reading ahead can hide the disk.
void stall_figures(const LoaderBenchOptions& o, const fs::path& dir, BenchOutput& out) {
  const int64_t count = o.quick ? 20000 : 60000;
  const std::string path = (dir / "stall.shard").string();
  write_synthetic(path, count);
  auto disk =
      std::make_shared<ThrottledSource>(std::make_shared<ShardSource>(path), o.throttle_mbps);
  const int64_t gb = o.stall_batch;
  const double batch_bytes = double(gb * kRecordBytes);
  const double compute_s = batch_bytes / (o.consume_share * o.throttle_mbps * 1e6);
  const int64_t steps = std::min<int64_t>(count / gb, o.quick ? 30 : 100);
  for (int k : {0, 4}) {
    Loader l(disk, {.global_batch = gb, .seed = 3, .prefetch = k});
    EpochTimes t = run_epoch(l, 0, compute_s, steps);
    const double stall = t.wait / t.wall;
    out.line(fmt::format(
        "{:<44} {:>9.1f} % (batch {}, step {:.2f} ms, compute {:.2f} ms, disk {:.0f} MB/s = "
        "{:.2f} ms/batch)",
        k == 0 ? "stall share, throttled, K=0" : "stall share, throttled, K=4", 100 * stall, gb,
        1e3 * t.wall / double(t.steps), 1e3 * compute_s, o.throttle_mbps,
        1e3 * batch_bytes / (o.throttle_mbps * 1e6)));
    out.json({{"bench", "loader"},
              {"figure", "stall"},
              {"prefetch", k},
              {"throttle_mbps", o.throttle_mbps},
              {"stall_share", stall},
              {"step_ms", 1e3 * t.wall / double(t.steps)},
              {"compute_ms", 1e3 * compute_s},
              {"batch", gb},
              {"consume_share", o.consume_share},
              {"steps", t.steps}});
  }
}

// 4. Shards converted from the Fashion-MNIST IDX files give bitwise the same batches.
void shard_vs_idx_figure(const LoaderBenchOptions& o, const fs::path& dir, BenchOutput& out) {
  if (!fs::exists(fs::path(o.fashion_dir))) {
    out.line(fmt::format("shards vs IDX: skipped ({} not found)", o.fashion_dir));
    return;
  }
  const bool train = !o.quick;
  ConvertOptions co;
  co.test_split = !train;
  const std::string path = (dir / "fmnist.shard").string();
  convert_to_shard(o.fashion_dir, path, co);
  Dataset ds = load_fashion_mnist(o.fashion_dir, train, std::nullopt, nullptr);
  auto shard = std::make_shared<ShardSource>(path);
  LoaderOptions lo{.global_batch = 128, .seed = 42, .prefetch = 4};
  Loader a(ds, lo), b(shard, lo);
  int64_t batches = 0, differing = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    a.start_epoch(epoch);
    b.start_epoch(epoch);
    Batch ba, bb;
    while (a.next(ba)) {
      if (!b.next(bb) || ba.size != bb.size ||
          std::memcmp(ba.x, bb.x, size_t(ba.size * ds.sample_numel()) * 4) != 0 ||
          std::memcmp(ba.y, bb.y, size_t(ba.size) * 4) != 0)
        ++differing;
      ++batches;
    }
    if (b.next(bb)) ++differing;
  }
  out.line(fmt::format("{:<44} {:>10} ({} batches over 2 epochs of {}, {} differ)",
                       "shards vs IDX, same seed", differing == 0 ? "identical" : "DIFFERENT",
                       batches, train ? "train" : "t10k", differing));
  out.json({{"bench", "loader"},
            {"figure", "shard_vs_idx"},
            {"identical", differing == 0},
            {"batches", batches},
            {"set", train ? "train" : "t10k"}});
}

}  // namespace

void run_loader_bench(const LoaderBenchOptions& o, BenchOutput& out) {
  const fs::path dir = fs::path(o.work_dir) / ("loom_loader_bench_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct Cleanup {
    fs::path d;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } cleanup{dir};
  out.note(fmt::format("loom bench loader{}", o.quick ? " (quick)" : ""));
  const std::string set = peak_rss_figure(o, dir, out);
  shard_throughput_figures(o, set, out);
  stall_figures(o, dir, out);
  shard_vs_idx_figure(o, dir, out);
}

}  // namespace loom::measure
