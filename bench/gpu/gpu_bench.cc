// loom_gpu_bench: what the CUDA backend delivers on this GPU, for bench/gpu/check.sh.
//   - MLP training samples/s (the zoo's 784-1024-1024-10 MLP, ReLU, dropout 0.5, SGD momentum
//     0.9, batch 1024 by default) on synthetic data already on the device: forward, loss (which
//     reads the loss back every step, as training does), backward, update;
//   - fp32 GEMM TFLOP/s through the backend (cuBLAS), and with TF32 when asked;
//   - conv: a convolution layer's forward and both backward ops on loom's kernels and on
//     cuDNN (where it runs), TFLOP/s per shape;
//   - device-to-device copy bandwidth and ReLU bandwidth (bytes read + written);
//   - the GPU codecs' encode and decode (fp16, bf16, 1-bit, int8, top-k), as bytes moved per second
//   and as a
//     fraction of the copy bandwidth, and as fp32 gradient bytes per second;
//   - info: the driver and runtime versions and the device; nccl: how long the NCCL
//     transport takes to start (world of one: communicator set-up and a first allreduce).
// --parts picks which run (bench/gpu/check.sh runs info,nccl first, then a trimmed rest).
// Prints a table and one JSON object per line; with --json each line is appended to the file
// as soon as it is measured, so a part that hangs or crashes loses only its own figures.
// Without a GPU it says so and exits 0, or 3 under LOOM_GPU_REQUIRED=1 (a check that must
// not pass on a machine whose CUDA did not start).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <sstream>
#include <tuple>
#include <vector>

#include "loom/comm/transport_registry.h"
#include "loom/compress/cuda/codec_kernels.h"
#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/core/rng.h"
#include "loom/core/timer.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/optim/optimizer.h"
#include "loom/plan/model_reader.h"
#include "loom/plan/optim_reader.h"
#include "loom/tensor/backend_registry.h"
#include "loom/tensor/buffer.h"
#include "loom/tensor/cuda/cuda_backend.h"

namespace {

using loom::Backend;
using loom::DeviceBuffer;
using nlohmann::json;

std::vector<json> g_results;
std::FILE* g_json = nullptr;  // --json: appended to as each figure is measured
double g_copy_gbps = 0;       // measured by bench_bandwidth, the codecs' yardstick

void report(const std::string& what, double value, const std::string& unit, json extra) {
  fmt::print("  {:<44} {:>12.2f} {}\n", what, value, unit);
  extra["bench"] = "gpu";
  extra["metric"] = what;
  extra["value"] = value;
  extra["unit"] = unit;
  g_results.push_back(extra);
  if (g_json) {
    fmt::print(g_json, "{}\n", extra.dump());
    std::fflush(g_json);
  }
}

bool gpu_required() {
  const char* v = std::getenv("LOOM_GPU_REQUIRED");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

std::string version_text(int v) {  // CUDA's 13000 -> "13.0"
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

void bench_info(Backend& be) {
  int driver = 0, runtime = 0;
  (void)cudaDriverGetVersion(&driver);
  (void)cudaRuntimeGetVersion(&runtime);
  (void)cudaGetLastError();
  auto* cuda_be = dynamic_cast<loom::CudaBackend*>(&be);
  fmt::print("  device            {}\n", be.name());
  fmt::print("  CUDA driver API   {}\n", version_text(driver));
  fmt::print("  CUDA runtime      {}\n", version_text(runtime));
  if (cuda_be) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, cuda_be->device_index()) == cudaSuccess) {
      fmt::print("  memory            {:.1f} GiB, {} SMs\n",
                 double(prop.totalGlobalMem) / (1 << 30), prop.multiProcessorCount);
    }
    (void)cudaGetLastError();
  }
  // cuDNN: whether the convolutions can run on it here (bench/gpu/check.sh expects the cuDNN
  // test to skip only where this says it cannot). Asked of a second backend, so that starting
  // cuDNN does not change the one being measured.
  std::string cudnn = "no CUDA backend";
  if (cuda_be) {
    try {
      loom::CudaBackend probe(cuda_be->device_index());
      probe.set_conv_engine(loom::CudaBackend::ConvEngine::kCudnn);
      cudnn = probe.conv_engine();
    } catch (const loom::Error& e) {
      cudnn = fmt::format("unavailable: {}", e.what());
    }
    fmt::print("  convolutions      {} (this backend: {})\n", cudnn, cuda_be->conv_engine());
  }
  json j = {{"bench", "gpu"},
            {"metric", "info"},
            {"device", be.name()},
            {"cuda_driver", version_text(driver)},
            {"cuda_runtime", version_text(runtime)},
            {"cudnn", cudnn}};
  fmt::print("{}\n", j.dump());
  if (g_json) {
    fmt::print(g_json, "{}\n", j.dump());
    std::fflush(g_json);
  }
}

// The NCCL transport's start-up: create_world (the unique id, ncclCommInitRank) and the first
// collective (NCCL connects lazily), for one worker on this GPU.
void bench_nccl_startup() {
  if (!loom::comm::transport_built("nccl")) {
    fmt::print("  nccl: not built (LOOM_CUDA=ON with NCCL found)\n");
    return;
  }
  loom::Stopwatch sw;
  auto world = loom::comm::create_world("nccl", 1, loom::comm::CommOptions{});
  double init_s = 0, first_s = 0;
  world->run([&](loom::comm::Communicator& c) {
    init_s = sw.seconds();
    Backend* be = loom::comm::device_backend(c);
    DeviceBuffer<float> x(*be, 1 << 20);
    loom::Stopwatch first;
    c.allreduce(std::span<float>(x.data(), size_t(x.size())));
    first_s = first.seconds();
  });
  report("nccl start-up s (1 rank: init + first allreduce)", init_s + first_s, "s",
         {{"op", "nccl_startup"}, {"init_s", init_s}, {"first_allreduce_s", first_s}});
}

std::vector<float> random_floats(size_t n, uint64_t seed) {
  loom::Rng rng(seed, 0, loom::RngPurpose::kSynthetic);
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal();
  return v;
}

void bench_mlp(Backend& be, int64_t batch, int warmup, int steps, const std::string& precision) {
  const loom::Config cfg = loom::Config::from_string(
      "model = \"mlp\"\nmlp.hidden = [1024, 1024]\nmlp.dropout = 0.5\n"
      "optim.name = \"sgd\"\noptim.momentum = 0.9\n");
  auto model = loom::nn::build_model(loom::plan::read_model_spec(cfg), be, {1, 28, 28}, 10);
  model->init_params(1);
  auto opt =
      loom::optim::make_optimizer(loom::plan::read_optimizer_options(cfg), be, model->num_params());
  // A few distinct batches on the device, cycled, so the loop never waits on the host.
  constexpr int kBatches = 4;
  DeviceBuffer<float> x(be, kBatches * batch * 784);
  DeviceBuffer<int32_t> y(be, kBatches * batch);
  {
    auto hx = random_floats(size_t(kBatches * batch * 784), 2);
    std::vector<int32_t> hy(size_t(kBatches * batch));
    loom::Rng rng(3, 0, loom::RngPurpose::kSynthetic);
    for (auto& l : hy) l = int32_t(rng.below(10));
    be.copy_to_device(x.data(), hx.data(), hx.size() * sizeof(float));
    be.copy_to_device(y.data(), hy.data(), hy.size() * sizeof(int32_t));
  }
  double loss = 0;
  auto step = [&](int s) {
    const int b = s % kBatches;
    loom::nn::StepInfo info{true, loom::derive_key(1, 0, loom::RngPurpose::kDropout, uint64_t(s)),
                            int64_t(s) * batch};
    model->forward(x.data() + b * batch * 784, batch, info);
    loss = model->loss(y.data() + b * batch, 1.0f / float(batch)).loss_sum / double(batch);
    model->backward();
    opt->step(model->params(), model->grads(), model->num_params(), 0.05f);
  };
  for (int s = 0; s < warmup; ++s) step(s);
  be.synchronize();
  loom::Stopwatch sw;
  for (int s = 0; s < steps; ++s) step(warmup + s);
  be.synchronize();
  const double secs = sw.seconds();
  const double flops = 3.0 * double(model->flops_per_sample()) * double(batch) * steps;
  report(fmt::format("mlp train samples/s (batch {}, {})", batch, precision),
         double(batch) * steps / secs, "samples/s",
         {{"framework", "loom"},
          {"precision", precision},
          {"batch", batch},
          {"steps", steps},
          {"step_ms", secs / steps * 1e3},
          {"tflops", flops / secs * 1e-12},
          {"final_loss", loss},
          {"backend", be.name()}});
}

void bench_gemm(Backend& be, int64_t size, int reps, const std::string& precision) {
  const int64_t n = size;
  DeviceBuffer<float> a(be, n * n), b(be, n * n), c(be, n * n);
  auto host = random_floats(size_t(n * n), 4);
  be.copy_to_device(a.data(), host.data(), host.size() * sizeof(float));
  be.copy_to_device(b.data(), host.data(), host.size() * sizeof(float));
  for (int r = 0; r < 2; ++r)
    be.gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  be.synchronize();
  loom::Stopwatch sw;
  for (int r = 0; r < reps; ++r)
    be.gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  be.synchronize();
  const double secs = sw.seconds();
  report(fmt::format("gemm {} {}^3 TFLOP/s", precision, n), 2.0 * n * n * n * reps / secs * 1e-12,
         "TFLOP/s", {{"op", "gemm"}, {"precision", precision}, {"n", n}, {"reps", reps}});
}

// One convolution layer's training work (forward, backward data, backward weights) on each
// engine of the CUDA backend: loom's own kernels and cuDNN (where it runs), as TFLOP/s of the
// three ops' 6 N K C R S P Q / groups multiply-adds counted twice.
void bench_conv(int device, int reps) {
  struct Shape {
    const char* name;
    loom::ConvGeometry g;
  };
  auto make = [](int64_t batch, int64_t c, int64_t hw, int64_t k, int64_t kernel, int64_t stride,
                 int64_t groups) {
    loom::ConvGeometry g;
    g.batch = batch, g.in_c = c, g.in_h = hw, g.in_w = hw, g.out_c = k;
    g.kernel_h = g.kernel_w = kernel, g.stride_h = g.stride_w = stride;
    g.pad_h = g.pad_w = kernel / 2, g.groups = groups;
    g.out_h = (hw + 2 * g.pad_h - kernel) / stride + 1;
    g.out_w = (hw + 2 * g.pad_w - kernel) / stride + 1;
    return g;
  };
  const Shape shapes[] = {{"resnet20 3x3 64ch 8x8 b128", make(128, 64, 8, 64, 3, 1, 1)},
                          {"resnet20 3x3 16ch 32x32 b128", make(128, 16, 32, 16, 3, 1, 1)},
                          {"3x3 256ch 14x14 b64", make(64, 256, 14, 256, 3, 1, 1)},
                          {"1x1 256->1024 14x14 b64", make(64, 256, 14, 1024, 1, 1, 1)},
                          {"depthwise 3x3 256ch 14x14 b16", make(16, 256, 14, 256, 3, 1, 256)}};
  for (const char* engine : {"loom", "cudnn"}) {
    loom::CudaBackend be(device);
    try {
      be.set_conv_engine(std::strcmp(engine, "loom") == 0 ? loom::CudaBackend::ConvEngine::kLoom
                                                          : loom::CudaBackend::ConvEngine::kCudnn);
    } catch (const loom::ConfigError& e) {
      fmt::print("  conv on {}: not run ({})\n", engine, e.what());
      continue;
    }
    for (const Shape& sh : shapes) {
      const loom::ConvGeometry& g = sh.g;
      const int64_t nx = g.batch * g.in_c * g.in_h * g.in_w;
      const int64_t ny = g.batch * g.out_c * g.out_h * g.out_w;
      const int64_t nw = g.out_c * (g.in_c / g.groups) * g.kernel_h * g.kernel_w;
      DeviceBuffer<float> x(be, nx), y(be, ny), w(be, nw), b(be, g.out_c), dx(be, nx), dw(be, nw),
          db(be, g.out_c);
      be.fill(x.data(), nx, 0.5f);
      be.fill(w.data(), nw, 0.25f);
      auto step = [&] {
        be.conv2d_forward(g, x.data(), w.data(), b.data(), y.data());
        be.conv2d_backward_data(g, w.data(), y.data(), dx.data());
        be.conv2d_backward_weights(g, x.data(), y.data(), dw.data(), db.data());
      };
      step();  // descriptors, algorithm choice, workspace
      be.synchronize();
      loom::Stopwatch sw;
      for (int r = 0; r < reps; ++r) step();
      be.synchronize();
      const double secs = sw.seconds() / reps;
      const double flops = 3.0 * 2.0 * double(ny) * double(nw / g.out_c);
      report(fmt::format("conv {} {} TFLOP/s", engine, sh.name), flops / secs * 1e-12, "TFLOP/s",
             {{"op", "conv"},
              {"engine", be.conv_engine()},
              {"shape", sh.name},
              {"ms_per_step", secs * 1e3}});
    }
  }
}

void bench_bandwidth(Backend& be, int64_t bytes, int reps) {
  const int64_t n = bytes / 4;
  DeviceBuffer<float> src(be, n), dst(be, n);
  be.fill(src.data(), n, -1.0f);
  auto time = [&](auto&& op) {
    op();
    be.synchronize();
    loom::Stopwatch sw;
    for (int r = 0; r < reps; ++r) op();
    be.synchronize();
    return sw.seconds() / reps;
  };
  const double copy_s = time([&] { be.copy(dst.data(), src.data(), size_t(n) * 4); });
  const double relu_s = time([&] { be.relu_forward(src.data(), dst.data(), n); });
  // Bytes read plus bytes written, the convention of the copy figure in KINDS.md.
  g_copy_gbps = 2.0 * double(bytes) / copy_s * 1e-9;
  report("device copy GB/s (read + write)", g_copy_gbps, "GB/s",
         {{"op", "copy"}, {"bytes", bytes}});
  report("relu GB/s (read + write)", 2.0 * double(bytes) / relu_s * 1e-9, "GB/s",
         {{"op", "relu"}, {"bytes", bytes}, {"fraction_of_copy", copy_s / relu_s}});
}

void bench_codecs(Backend& be, int64_t bytes, int reps) {
  auto* cuda_be = dynamic_cast<loom::CudaBackend*>(&be);
  if (!cuda_be) return;
  const cudaStream_t s = cuda_be->compute_stream();
  const int64_t n = bytes / 4, column = 512;
  DeviceBuffer<float> g(be, n), r(be, n), out(be, n);
  const int64_t int8_block = 512, topk_k = (n + 99) / 100;  // the codecs' defaults: 512, 1%
  DeviceBuffer<uint8_t> packed(
      be, std::max({loom::cuda::half_encoded_bytes(n), loom::cuda::onebit_encoded_bytes(n, column),
                    loom::cuda::int8_encoded_bytes(n, int8_block), 8 * topk_k}));
  DeviceBuffer<uint8_t> topk_ws(be, loom::cuda::topk_workspace_bytes(n));
  DeviceBuffer<int> bad(be, 1);
  {
    auto host = random_floats(size_t(n), 5);
    be.copy_to_device(g.data(), host.data(), host.size() * sizeof(float));
  }
  auto time = [&](auto&& op) {
    op();
    be.synchronize();
    loom::Stopwatch sw;
    for (int i = 0; i < reps; ++i) op();
    be.synchronize();
    return sw.seconds() / reps;
  };
  struct Codec {
    const char* name;
    int64_t packed_bytes;
    std::function<void()> encode, decode;
  };
  auto* p16 = reinterpret_cast<uint16_t*>(packed.data());
  const Codec codecs[] = {
      {"fp16", loom::cuda::half_encoded_bytes(n),
       [&] { loom::cuda::fp16_encode(s, g.data(), r.data(), n, p16, bad.data()); },
       [&] { loom::cuda::fp16_decode(s, p16, n, out.data(), true); }},
      {"bf16", loom::cuda::half_encoded_bytes(n),
       [&] { loom::cuda::bf16_encode(s, g.data(), r.data(), n, p16, bad.data()); },
       [&] { loom::cuda::bf16_decode(s, p16, n, out.data(), true); }},
      {"onebit", loom::cuda::onebit_encoded_bytes(n, column),
       [&] {
         loom::cuda::onebit_encode(s, g.data(), r.data(), n, column, packed.data(), bad.data());
       },
       [&] { loom::cuda::onebit_decode(s, packed.data(), n, column, out.data(), true); }},
      {"int8", loom::cuda::int8_encoded_bytes(n, int8_block),
       [&] {
         loom::cuda::int8_encode(s, g.data(), r.data(), n, int8_block, packed.data(), bad.data());
       },
       [&] { loom::cuda::int8_decode(s, packed.data(), n, int8_block, out.data(), true); }},
      // Top-k reads s three more times (two histogram passes, the count, the emit): not
      // counted, so its fraction of copy is what a one-pass codec would need to match.
      {"topk", 8 * topk_k,
       [&] {
         loom::cuda::topk_encode(s, g.data(), r.data(), n, topk_k, packed.data(), topk_ws.data(),
                                 bad.data());
       },
       [&] { loom::cuda::topk_decode(s, packed.data(), topk_k, n, out.data(), true); }},
  };
  for (const auto& c : codecs) {
    // Encode reads g and r, writes r and the packed bytes; accumulate-decode reads the packed
    // bytes and out, writes out. 1-bit reads r twice more (sums, then signs): not counted.
    const double enc_s = time(c.encode), dec_s = time(c.decode);
    const double enc_moved = 3.0 * bytes + double(c.packed_bytes);
    // Top-k's accumulate-decode touches only its k entries: 8 k bytes read, 4 k read + written.
    const bool sparse = std::string(c.name) == "topk";
    const double dec_moved =
        sparse ? 2.0 * double(c.packed_bytes) : 2.0 * bytes + double(c.packed_bytes);
    for (auto [what, secs, moved] :
         {std::tuple{"encode", enc_s, enc_moved}, std::tuple{"decode", dec_s, dec_moved}}) {
      const double gbps = moved / secs * 1e-9;
      report(fmt::format("{} {} GB/s moved", c.name, what), gbps, "GB/s",
             {{"op", "codec"},
              {"codec", c.name},
              {"direction", what},
              {"bytes", bytes},
              {"fp32_GBps", double(bytes) / secs * 1e-9},
              {"fraction_of_copy", g_copy_gbps > 0 ? gbps / g_copy_gbps : 0.0}});
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"loom GPU benchmark: MLP training, GEMM, copy bandwidth"};
  int64_t batch = 1024, gemm_size = 8192, copy_mib = 1024;
  int warmup = 20, steps = 200, gemm_reps = 10, copy_reps = 20, conv_reps = 10;
  std::string json_path, parts_text = "info,mlp,gemm,conv,bandwidth,codecs";
  bool tf32 = false;
  app.add_option("--batch", batch, "MLP batch size");
  app.add_option("--warmup", warmup, "untimed MLP steps");
  app.add_option("--steps", steps, "timed MLP steps");
  app.add_option("--gemm-size", gemm_size, "square GEMM size");
  app.add_option("--gemm-reps", gemm_reps, "timed GEMMs");
  app.add_option("--conv-reps", conv_reps, "timed convolution steps per shape and engine");
  app.add_option("--copy-mib", copy_mib, "bytes per copy, MiB");
  app.add_option("--copy-reps", copy_reps, "timed copies (and codec calls)");
  app.add_option("--json", json_path, "append JSON lines here (stdout always gets them)");
  app.add_flag("--tf32", tf32,
               "also time GEMM and the MLP with TF32 tensor cores (LOOM_CUDA_TF32=1)");
  app.add_option("--parts", parts_text,
                 "comma-separated, in this order: info, nccl, mlp, gemm, conv, bandwidth, "
                 "codecs");
  CLI11_PARSE(app, argc, argv);
  std::set<std::string> parts;
  {
    std::stringstream ss(parts_text);
    for (std::string p; std::getline(ss, p, ',');) {
      if (p.empty()) continue;
      if (p != "info" && p != "nccl" && p != "mlp" && p != "gemm" && p != "conv" &&
          p != "bandwidth" && p != "codecs") {
        fmt::print(stderr, "loom_gpu_bench: unknown part '{}'\n", p);
        return 2;
      }
      parts.insert(p);
    }
  }
  auto want = [&](const char* p) { return parts.count(p) > 0; };

  std::unique_ptr<Backend> be;
  try {
    be = loom::make_backend("cuda");
  } catch (const loom::ConfigError& e) {
    if (gpu_required()) {
      fmt::print("loom_gpu_bench: FAILED: LOOM_GPU_REQUIRED is set and there is no GPU: {}\n",
                 e.what());
      return 3;
    }
    fmt::print("loom_gpu_bench: skipped, no GPU: {}\n", e.what());
    return 0;
  }
  if (!json_path.empty()) {
    g_json = std::fopen(json_path.c_str(), "a");
    if (!g_json) fmt::print(stderr, "loom_gpu_bench: cannot append to {}\n", json_path);
  }
  int rc = 0;
  try {
    fmt::print("loom GPU benchmark on {}\n", be->name());
    if (want("info")) bench_info(*be);
    if (want("nccl")) bench_nccl_startup();
    if (want("mlp")) bench_mlp(*be, batch, warmup, steps, "fp32");
    if (want("gemm")) bench_gemm(*be, gemm_size, gemm_reps, "fp32");
    // The low-precision products (docs/precision.md): the same GEMM and MLP step with bf16 and
    // fp16 inputs, fp32 accumulation, on the same backend.
    for (loom::Precision p : {loom::Precision::kBf16, loom::Precision::kFp16}) {
      if (!(want("gemm") || want("mlp")) || !be->matmul_precision_unsupported(p).empty()) continue;
      be->set_matmul_precision(p);
      if (want("gemm")) bench_gemm(*be, gemm_size, gemm_reps, loom::precision_name(p));
      if (want("mlp")) bench_mlp(*be, batch, warmup, steps, loom::precision_name(p));
      be->set_matmul_precision(loom::Precision::kFp32);
    }
    if (want("conv")) {
      if (auto* cuda_be = dynamic_cast<loom::CudaBackend*>(be.get()))
        bench_conv(cuda_be->device_index(), conv_reps);
    }
    if (want("bandwidth") || want("codecs")) bench_bandwidth(*be, copy_mib << 20, copy_reps);
    if (want("codecs")) bench_codecs(*be, copy_mib << 20, copy_reps);
    if (tf32 && (want("gemm") || want("mlp"))) {
      be.reset();
      setenv("LOOM_CUDA_TF32", "1", 1);
      auto be32 = loom::make_backend("cuda");
      if (want("gemm")) bench_gemm(*be32, gemm_size, gemm_reps, "tf32");
      if (want("mlp")) bench_mlp(*be32, batch, warmup, steps, "tf32");
    }
  } catch (const loom::Error& e) {
    fmt::print(stderr, "loom_gpu_bench: {}\n", e.what());
    rc = 1;
  }
  for (const auto& j : g_results) fmt::print("{}\n", j.dump());
  if (g_json) std::fclose(g_json);
  return rc;
}
