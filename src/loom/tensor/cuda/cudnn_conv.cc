#include "loom/tensor/cuda/cudnn_conv.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "loom/config.h"
#include "loom/core/error.h"
#include "loom/tensor/cuda/kernels.h"

#if LOOM_HAVE_CUDNN
#include <cudnn.h>
#include <dlfcn.h>
#endif

namespace loom::cuda {

std::string describe_conv(const ConvGeometry& g) {
  return fmt::format(
      "conv2d batch {}, in {}x{}x{}, out {}x{}x{}, kernel {}x{}, stride {}x{}, padding {}x{}, "
      "dilation {}x{}, groups {}",
      g.batch, g.in_c, g.in_h, g.in_w, g.out_c, g.out_h, g.out_w, g.kernel_h, g.kernel_w,
      g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dilation_h, g.dilation_w, g.groups);
}

#if LOOM_HAVE_CUDNN

namespace {

// Every cuDNN function this file calls, resolved with dlsym by name; the header gives each
// pointer its type.
#define LOOM_CUDNN_FUNCTIONS(X)                         \
  X(cudnnGetVersion)                                    \
  X(cudnnGetErrorString)                                \
  X(cudnnCreate)                                        \
  X(cudnnDestroy)                                       \
  X(cudnnSetStream)                                     \
  X(cudnnCreateTensorDescriptor)                        \
  X(cudnnSetTensor4dDescriptor)                         \
  X(cudnnDestroyTensorDescriptor)                       \
  X(cudnnCreateFilterDescriptor)                        \
  X(cudnnSetFilter4dDescriptor)                         \
  X(cudnnDestroyFilterDescriptor)                       \
  X(cudnnCreateConvolutionDescriptor)                   \
  X(cudnnSetConvolution2dDescriptor)                    \
  X(cudnnSetConvolutionGroupCount)                      \
  X(cudnnSetConvolutionMathType)                        \
  X(cudnnDestroyConvolutionDescriptor)                  \
  X(cudnnGetConvolution2dForwardOutputDim)              \
  X(cudnnGetConvolutionForwardAlgorithmMaxCount)        \
  X(cudnnGetConvolutionForwardAlgorithm_v7)             \
  X(cudnnGetConvolutionForwardWorkspaceSize)            \
  X(cudnnConvolutionForward)                            \
  X(cudnnGetConvolutionBackwardDataAlgorithmMaxCount)   \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7)        \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize)       \
  X(cudnnConvolutionBackwardData)                       \
  X(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount) \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7)      \
  X(cudnnGetConvolutionBackwardFilterWorkspaceSize)     \
  X(cudnnConvolutionBackwardFilter)                     \
  X(cudnnConvolutionBackwardBias)                       \
  X(cudnnAddTensor)

struct Api {
#define LOOM_CUDNN_POINTER(f) decltype(&::f) f = nullptr;
  LOOM_CUDNN_FUNCTIONS(LOOM_CUDNN_POINTER)
#undef LOOM_CUDNN_POINTER
  // Optional (cuDNN 9 has it): the last error's own words, for the error message.
  decltype(&::cudnnGetLastErrorString) last_error_string = nullptr;
  size_t version = 0;
};

// cuDNN 9 numbers versions major*10000 + minor*100 + patch, cuDNN 8 major*1000 + minor*100 +
// patch (cudnn_version.h).
std::string version_text(size_t v) {
  if (v >= 90000) return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
  return fmt::format("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100);
}
size_t version_major(size_t v) {
  return v >= 90000 ? v / 10000 : v / 1000;
}

struct Loaded {
  Api api;
  std::string error;  // empty when api is usable
};

// Loads the library once per process and keeps it loaded: handles made from it live as long
// as their backends, up to exit.
const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded r;
    const std::string name = fmt::format("libcudnn.so.{}", CUDNN_MAJOR);
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      r.error = fmt::format("cannot load {} ({})", name, e ? e : "no reason given");
      return r;
    }
    std::string missing;
#define LOOM_CUDNN_RESOLVE(f)                                    \
  r.api.f = reinterpret_cast<decltype(r.api.f)>(dlsym(lib, #f)); \
  if (!r.api.f) missing += missing.empty() ? #f : std::string(", ") + #f;
    LOOM_CUDNN_FUNCTIONS(LOOM_CUDNN_RESOLVE)
#undef LOOM_CUDNN_RESOLVE
    r.api.last_error_string =
        reinterpret_cast<decltype(r.api.last_error_string)>(dlsym(lib, "cudnnGetLastErrorString"));
    if (!missing.empty()) {
      r.error = fmt::format("{} lacks {}", name, missing);
      return r;
    }
    r.api.version = r.api.cudnnGetVersion();
    if (version_major(r.api.version) != CUDNN_MAJOR) {
      r.error = fmt::format("{} is cuDNN {}, built against {}.{}", name,
                            version_text(r.api.version), CUDNN_MAJOR, CUDNN_MINOR);
      return r;
    }
    return r;
  }();
  return l;
}

std::string status_text(const Api& api, cudnnStatus_t s) {
  std::string text = fmt::format("cuDNN error {} ({})", int(s), api.cudnnGetErrorString(s));
  if (api.last_error_string) {
    char detail[512] = {};
    api.last_error_string(detail, sizeof(detail));
    if (detail[0] != '\0') text += fmt::format(": {}", detail);
  }
  return text;
}

[[noreturn]] void call_failed(const Api& api, cudnnStatus_t s, const char* call,
                              const ConvGeometry& g) {
  throw Error(fmt::format("{} in {} for {}", status_text(api, s), call, describe_conv(g)));
}

// Calls api.f(args...) and throws loom::Error naming f and the geometry g on failure.
#define LOOM_CUDNN(f, g, ...)                                    \
  do {                                                           \
    const cudnnStatus_t s_ = api.f(__VA_ARGS__);                 \
    if (s_ != CUDNN_STATUS_SUCCESS) call_failed(api, s_, #f, g); \
  } while (0)

bool fits_int(int64_t v) {
  return v > 0 && v <= std::numeric_limits<int>::max();
}

enum Direction { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };

struct Choice {
  bool chosen = false;  // the heuristics were asked
  bool found = false;   // and gave an algorithm loom accepts
  int algo = 0;
  size_t workspace = 0;
};

// One geometry's descriptors in one precision. Each direction has its own convolution
// descriptor, since each carries its algorithm's math type. x, y and w are in the plan's data
// type (fp32, bf16 or fp16); y32 and bias are fp32, for the bias add and its gradient.
struct Plan {
  bool usable = false;  // cuDNN's output size is the geometry's
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, y32 = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv[3] = {nullptr, nullptr, nullptr};
  Choice choice[3];
  Precision precision = Precision::kFp32;
};

cudnnDataType_t data_type(Precision p) {
  return p == Precision::kBf16   ? CUDNN_DATA_BFLOAT16
         : p == Precision::kFp16 ? CUDNN_DATA_HALF
                                 : CUDNN_DATA_FLOAT;
}

}  // namespace

struct CudnnConv::Impl {
  const Api& api;
  int device;
  bool tf32;
  std::mutex mu;
  cudnnHandle_t handles[2] = {nullptr, nullptr};
  std::string handle_error;  // why the first handle could not be made
  std::map<std::pair<ConvGeometry, Precision>, std::unique_ptr<Plan>> plans;
  CudnnStats stats;

  Impl(const Api& a, int dev, bool t) : api(a), device(dev), tf32(t) {}

  ~Impl() {
    // Errors while tearing down are dropped (the device may be gone already).
    for (auto& [g, p] : plans) {
      for (cudnnTensorDescriptor_t d : {p->x, p->y, p->y32, p->bias})
        if (d) (void)api.cudnnDestroyTensorDescriptor(d);
      if (p->w) (void)api.cudnnDestroyFilterDescriptor(p->w);
      for (cudnnConvolutionDescriptor_t c : p->conv)
        if (c) (void)api.cudnnDestroyConvolutionDescriptor(c);
    }
    for (cudnnHandle_t h : handles)
      if (h) (void)api.cudnnDestroy(h);
    (void)cudaGetLastError();
  }

  // fp32 precision unless TF32 was allowed; never fp16 conversions. In bf16 and fp16 the
  // tensors are in the low format already, and tensor-core math is what they are for.
  bool math_ok(cudnnMathType_t m, Precision precision) const {
    if (precision != Precision::kFp32) return true;
    if (tf32) return m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    return m == CUDNN_FMA_MATH;
  }

  // The geometry's plan in `precision`, made on first use; under mu.
  Plan& plan(const ConvGeometry& g, Precision precision) {
    auto it = plans.find({g, precision});
    if (it != plans.end()) return *it->second;
    auto owned = std::make_unique<Plan>();
    Plan& p = *owned;
    p.precision = precision;
    plans.emplace(std::make_pair(g, precision),
                  std::move(owned));  // owned now, so a throw below leaks nothing
    stats.plans = int64_t(plans.size());
    const int64_t cin_g = g.in_c / g.groups;
    const bool in_range = fits_int(g.batch) && fits_int(g.in_c) && fits_int(g.in_h) &&
                          fits_int(g.in_w) && fits_int(g.out_c) && fits_int(g.out_h) &&
                          fits_int(g.out_w) && fits_int(g.batch * g.in_c * g.in_h * g.in_w) &&
                          fits_int(g.batch * g.out_c * g.out_h * g.out_w) &&
                          fits_int(g.out_c * cin_g * g.kernel_h * g.kernel_w) &&
                          fits_int(g.kernel_h) && fits_int(g.kernel_w) && fits_int(g.stride_h) &&
                          fits_int(g.stride_w) && fits_int(g.pad_h + 1) && fits_int(g.pad_w + 1) &&
                          fits_int(g.dilation_h) && fits_int(g.dilation_w) && fits_int(g.groups);
    if (!in_range) return p;
    LOOM_CUDNN(cudnnCreateTensorDescriptor, g, &p.x);
    LOOM_CUDNN(cudnnCreateTensorDescriptor, g, &p.y);
    LOOM_CUDNN(cudnnCreateTensorDescriptor, g, &p.y32);
    LOOM_CUDNN(cudnnCreateTensorDescriptor, g, &p.bias);
    LOOM_CUDNN(cudnnCreateFilterDescriptor, g, &p.w);
    const cudnnDataType_t type = data_type(precision);
    LOOM_CUDNN(cudnnSetTensor4dDescriptor, g, p.x, CUDNN_TENSOR_NCHW, type, int(g.batch),
               int(g.in_c), int(g.in_h), int(g.in_w));
    LOOM_CUDNN(cudnnSetTensor4dDescriptor, g, p.y, CUDNN_TENSOR_NCHW, type, int(g.batch),
               int(g.out_c), int(g.out_h), int(g.out_w));
    LOOM_CUDNN(cudnnSetTensor4dDescriptor, g, p.y32, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
               int(g.batch), int(g.out_c), int(g.out_h), int(g.out_w));
    LOOM_CUDNN(cudnnSetTensor4dDescriptor, g, p.bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
               int(g.out_c), 1, 1);
    // loom's weights are [out_c, in_c / groups, kernel_h, kernel_w], cuDNN's KCRS.
    LOOM_CUDNN(cudnnSetFilter4dDescriptor, g, p.w, type, CUDNN_TENSOR_NCHW, int(g.out_c),
               int(cin_g), int(g.kernel_h), int(g.kernel_w));
    for (cudnnConvolutionDescriptor_t& c : p.conv) {
      LOOM_CUDNN(cudnnCreateConvolutionDescriptor, g, &c);
      // Cross-correlation is what PyTorch and loom call convolution (no kernel flip). The
      // compute type is fp32 in every precision (cuDNN's PSEUDO_HALF / PSEUDO_BFLOAT16
      // configurations for low-precision tensors).
      LOOM_CUDNN(cudnnSetConvolution2dDescriptor, g, c, int(g.pad_h), int(g.pad_w), int(g.stride_h),
                 int(g.stride_w), int(g.dilation_h), int(g.dilation_w), CUDNN_CROSS_CORRELATION,
                 CUDNN_DATA_FLOAT);
      LOOM_CUDNN(cudnnSetConvolutionGroupCount, g, c, int(g.groups));
      // The math type the heuristics rank for; CUDNN_DEFAULT_MATH would allow TF32 on Ampere
      // and later, so plain fp32 needs CUDNN_FMA_MATH.
      LOOM_CUDNN(cudnnSetConvolutionMathType, g, c,
                 precision != Precision::kFp32 ? CUDNN_TENSOR_OP_MATH
                 : tf32                        ? CUDNN_DEFAULT_MATH
                                               : CUDNN_FMA_MATH);
    }
    int n = 0, c = 0, h = 0, w = 0;
    LOOM_CUDNN(cudnnGetConvolution2dForwardOutputDim, g, p.conv[kForward], p.x, p.w, &n, &c, &h,
               &w);
    p.usable = n == g.batch && c == g.out_c && h == g.out_h && w == g.out_w;
    return p;
  }

  // The first algorithm of the heuristics' ranking that loom accepts: deterministic, fp32
  // (math_ok), and within the workspace limit by the ranking's estimate and by the exact size
  // cuDNN gives for the math type it will run with.
  template <typename Perf, typename WorkspaceOf>
  bool pick(const ConvGeometry& g, Precision p_precision, const std::vector<Perf>& perfs,
            int returned, cudnnConvolutionDescriptor_t conv, WorkspaceOf workspace_of,
            Choice& out) {
    out.chosen = true;
    for (int i = 0; i < returned; ++i) {
      const Perf& pf = perfs[size_t(i)];
      if (pf.status != CUDNN_STATUS_SUCCESS || pf.determinism != CUDNN_DETERMINISTIC ||
          !math_ok(pf.mathType, p_precision) || pf.memory > kWorkspaceLimit)
        continue;
      LOOM_CUDNN(cudnnSetConvolutionMathType, g, conv, pf.mathType);
      size_t bytes = 0;
      if (workspace_of(pf.algo, &bytes) != CUDNN_STATUS_SUCCESS || bytes > kWorkspaceLimit)
        continue;
      out.found = true;
      out.algo = int(pf.algo);
      out.workspace = bytes;
      return true;
    }
    return false;
  }

  // The direction's algorithm for this plan, chosen on first use; under mu.
  const Choice& choose(Direction d, Plan& p, const ConvGeometry& g, cudnnHandle_t h) {
    Choice& ch = p.choice[d];
    if (ch.chosen) return ch;
    cudnnConvolutionDescriptor_t conv = p.conv[d];
    int count = 0, returned = 0;
    if (d == kForward) {
      LOOM_CUDNN(cudnnGetConvolutionForwardAlgorithmMaxCount, g, h, &count);
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perfs(size_t(std::max(count, 1)));
      LOOM_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7, g, h, p.x, p.w, conv, p.y, count,
                 &returned, perfs.data());
      pick(
          g, p.precision, perfs, returned, conv,
          [&](cudnnConvolutionFwdAlgo_t a, size_t* bytes) {
            return api.cudnnGetConvolutionForwardWorkspaceSize(h, p.x, p.w, conv, p.y, a, bytes);
          },
          ch);
    } else if (d == kBackwardData) {
      LOOM_CUDNN(cudnnGetConvolutionBackwardDataAlgorithmMaxCount, g, h, &count);
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perfs(size_t(std::max(count, 1)));
      LOOM_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7, g, h, p.w, p.y, conv, p.x, count,
                 &returned, perfs.data());
      pick(
          g, p.precision, perfs, returned, conv,
          [&](cudnnConvolutionBwdDataAlgo_t a, size_t* bytes) {
            return api.cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.w, p.y, conv, p.x, a,
                                                                    bytes);
          },
          ch);
    } else {
      LOOM_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount, g, h, &count);
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perfs(size_t(std::max(count, 1)));
      LOOM_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7, g, h, p.x, p.y, conv, p.w, count,
                 &returned, perfs.data());
      pick(
          g, p.precision, perfs, returned, conv,
          [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* bytes) {
            return api.cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p.x, p.y, conv, p.w, a,
                                                                      bytes);
          },
          ch);
    }
    return ch;
  }

  // What a call runs with, or null when cuDNN declines (counted).
  struct Ready {
    cudnnHandle_t handle = nullptr;
    Plan* plan = nullptr;
    Choice choice;
  };

  // cuDNN refused the chosen algorithm at its call (NOT_SUPPORTED: a limit on padding, shape or
  // shared memory the ranking did not show): this direction of the geometry is declined from
  // now on, and this call counted as declined, so the caller's kernels run instead. Any other
  // failure is an error.
  bool refused(cudnnStatus_t s, Plan& p, Direction d) {
    const bool not_supported = s == CUDNN_STATUS_NOT_SUPPORTED || (int(s) / 1000 == 3);
    if (!not_supported) return false;
    std::lock_guard<std::mutex> lock(mu);
    p.choice[d].found = false;
    --stats.calls;
    ++stats.declined;
    (void)cudaGetLastError();
    return true;
  }
  Ready prepare(Direction d, const CudnnLane& lane, const ConvGeometry& g, Precision precision) {
    std::lock_guard<std::mutex> lock(mu);
    Ready r;
    r.handle = handles[lane.index];
    LOOM_CHECK(r.handle != nullptr, "cuDNN: no handle on lane {} (CudnnConv::ready first)",
               lane.index);
    Plan& p = plan(g, precision);
    if (p.usable) {
      r.choice = choose(d, p, g, r.handle);
      if (r.choice.found) r.plan = &p;
    }
    if (r.plan) {
      ++stats.calls;
    } else {
      ++stats.declined;
    }
    return r;
  }
};

std::unique_ptr<CudnnConv> CudnnConv::open(int device, bool tf32, std::string* why) {
  const Loaded& l = loaded();
  if (!l.error.empty()) {
    if (why) *why = l.error;
    return nullptr;
  }
  return std::unique_ptr<CudnnConv>(new CudnnConv(std::make_unique<Impl>(l.api, device, tf32)));
}

std::string CudnnConv::version() const {
  return version_text(impl_->api.version);
}

bool CudnnConv::ready(const CudnnLane& lane, std::string* why) {
  Impl& m = *impl_;
  const Api& api = m.api;
  LOOM_CHECK(lane.index == 0 || lane.index == 1, "cuDNN: lane {} (0 or 1)", lane.index);
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.handles[lane.index]) return true;
  if (!m.handle_error.empty()) {
    if (why) *why = m.handle_error;
    return false;
  }
  cudnnHandle_t h = nullptr;
  cudnnStatus_t s = api.cudnnCreate(&h);
  if (s == CUDNN_STATUS_SUCCESS) {
    s = api.cudnnSetStream(h, lane.stream);
    if (s != CUDNN_STATUS_SUCCESS) (void)api.cudnnDestroy(h);
  }
  if (s != CUDNN_STATUS_SUCCESS) {
    (void)cudaGetLastError();  // cuDNN's own CUDA calls leave nothing for the next launch check
    m.handle_error = fmt::format("{} in cudnnCreate on device {}", status_text(api, s), m.device);
    if (why) *why = m.handle_error;
    return false;
  }
  m.handles[lane.index] = h;
  return true;
}

bool CudnnConv::takes(const ConvGeometry& g, Precision precision) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->plan(g, precision).usable;
}

namespace {

// The low-precision copies of one call's tensors in lane.operands: the two inputs rounded from
// fp32, and room for the output. Null pointers in fp32 (the call uses its own buffers).
struct LowOperands {
  const void* in0 = nullptr;
  const void* in1 = nullptr;
  void* out = nullptr;
  LowFormat format = LowFormat::kBf16;
};

LowOperands round_operands(const CudnnLane& lane, Precision precision, const float* in0, int64_t n0,
                           const float* in1, int64_t n1, int64_t n_out) {
  LowOperands o;
  if (precision == Precision::kFp32) return o;
  o.format = precision == Precision::kBf16 ? LowFormat::kBf16 : LowFormat::kFp16;
  const auto aligned = [](int64_t values) { return (size_t(values) * 2 + 255) / 256 * 256; };
  char* base = static_cast<char*>(lane.operands(aligned(n0) + aligned(n1) + aligned(n_out)));
  round_matrices(lane.stream, o.format, in0, 1, 1, n0, n0, n0, base);
  round_matrices(lane.stream, o.format, in1, 1, 1, n1, n1, n1, base + aligned(n0));
  o.in0 = base;
  o.in1 = base + aligned(n0);
  o.out = base + aligned(n0) + aligned(n1);
  return o;
}

int64_t x_size(const ConvGeometry& g) {
  return g.batch * g.in_c * g.in_h * g.in_w;
}
int64_t y_size(const ConvGeometry& g) {
  return g.batch * g.out_c * g.out_h * g.out_w;
}
int64_t w_size(const ConvGeometry& g) {
  return g.out_c * (g.in_c / g.groups) * g.kernel_h * g.kernel_w;
}

}  // namespace

bool CudnnConv::forward(const CudnnLane& lane, const ConvGeometry& g, const float* x,
                        const float* w, const float* bias, float* y, Precision precision) {
  const Api& api = impl_->api;
  const Impl::Ready r = impl_->prepare(kForward, lane, g, precision);
  if (!r.plan) return false;
  Plan& p = *r.plan;
  const LowOperands low = round_operands(lane, precision, x, x_size(g), w, w_size(g), y_size(g));
  void* work = r.choice.workspace ? lane.workspace(r.choice.workspace) : nullptr;
  const float one = 1.0f, zero = 0.0f;
  const cudnnStatus_t s = api.cudnnConvolutionForward(
      r.handle, &one, p.x, low.in0 ? low.in0 : x, p.w, low.in1 ? low.in1 : w, p.conv[kForward],
      cudnnConvolutionFwdAlgo_t(r.choice.algo), work, r.choice.workspace, &zero, p.y,
      low.out ? low.out : y);
  if (impl_->refused(s, p, kForward)) return false;
  if (s != CUDNN_STATUS_SUCCESS) call_failed(api, s, "cudnnConvolutionForward", g);
  if (low.out) widen(lane.stream, low.format, low.out, y_size(g), y);
  if (bias) LOOM_CUDNN(cudnnAddTensor, g, r.handle, &one, p.bias, bias, &one, p.y32, y);
  return true;
}

bool CudnnConv::backward_data(const CudnnLane& lane, const ConvGeometry& g, const float* w,
                              const float* dy, float* dx, Precision precision) {
  const Api& api = impl_->api;
  const Impl::Ready r = impl_->prepare(kBackwardData, lane, g, precision);
  if (!r.plan) return false;
  Plan& p = *r.plan;
  const LowOperands low = round_operands(lane, precision, w, w_size(g), dy, y_size(g), x_size(g));
  void* work = r.choice.workspace ? lane.workspace(r.choice.workspace) : nullptr;
  const float one = 1.0f, zero = 0.0f;
  const cudnnStatus_t s = api.cudnnConvolutionBackwardData(
      r.handle, &one, p.w, low.in0 ? low.in0 : w, p.y, low.in1 ? low.in1 : dy,
      p.conv[kBackwardData], cudnnConvolutionBwdDataAlgo_t(r.choice.algo), work, r.choice.workspace,
      &zero, p.x, low.out ? low.out : dx);
  if (impl_->refused(s, p, kBackwardData)) return false;
  if (s != CUDNN_STATUS_SUCCESS) call_failed(api, s, "cudnnConvolutionBackwardData", g);
  if (low.out) widen(lane.stream, low.format, low.out, x_size(g), dx);
  return true;
}

bool CudnnConv::backward_weights(const CudnnLane& lane, const ConvGeometry& g, const float* x,
                                 const float* dy, float* dw, float* dbias, Precision precision) {
  const Api& api = impl_->api;
  const Impl::Ready r = impl_->prepare(kBackwardFilter, lane, g, precision);
  if (!r.plan) return false;
  Plan& p = *r.plan;
  const LowOperands low = round_operands(lane, precision, x, x_size(g), dy, y_size(g), w_size(g));
  void* work = r.choice.workspace ? lane.workspace(r.choice.workspace) : nullptr;
  const float one = 1.0f, zero = 0.0f;
  const cudnnStatus_t s = api.cudnnConvolutionBackwardFilter(
      r.handle, &one, p.x, low.in0 ? low.in0 : x, p.y, low.in1 ? low.in1 : dy,
      p.conv[kBackwardFilter], cudnnConvolutionBwdFilterAlgo_t(r.choice.algo), work,
      r.choice.workspace, &zero, p.w, low.out ? low.out : dw);
  if (impl_->refused(s, p, kBackwardFilter)) return false;
  if (s != CUDNN_STATUS_SUCCESS) call_failed(api, s, "cudnnConvolutionBackwardFilter", g);
  if (low.out) widen(lane.stream, low.format, low.out, w_size(g), dw);
  // The bias gradient sums the fp32 dy in every precision (a reduction).
  if (dbias)
    LOOM_CUDNN(cudnnConvolutionBackwardBias, g, r.handle, &one, p.y32, dy, &zero, p.bias, dbias);
  return true;
}

CudnnStats CudnnConv::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

#else  // !LOOM_HAVE_CUDNN: the interface, always declining.

struct CudnnConv::Impl {};

std::unique_ptr<CudnnConv> CudnnConv::open(int, bool, std::string* why) {
  if (why)
    *why =
        "this build has no cuDNN (configure with -DLOOM_CUDNN=ON where cudnn.h and libcudnn are "
        "installed)";
  return nullptr;
}
std::string CudnnConv::version() const {
  return "";
}
bool CudnnConv::ready(const CudnnLane&, std::string* why) {
  if (why) *why = "this build has no cuDNN";
  return false;
}
bool CudnnConv::takes(const ConvGeometry&, Precision) {
  return false;
}
bool CudnnConv::forward(const CudnnLane&, const ConvGeometry&, const float*, const float*,
                        const float*, float*, Precision) {
  return false;
}
bool CudnnConv::backward_data(const CudnnLane&, const ConvGeometry&, const float*, const float*,
                              float*, Precision) {
  return false;
}
bool CudnnConv::backward_weights(const CudnnLane&, const ConvGeometry&, const float*, const float*,
                                 float*, float*, Precision) {
  return false;
}
CudnnStats CudnnConv::stats() const {
  return {};
}

#endif  // LOOM_HAVE_CUDNN

CudnnConv::CudnnConv(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudnnConv::~CudnnConv() = default;

}  // namespace loom::cuda
