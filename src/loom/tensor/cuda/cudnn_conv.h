// Convolution through cuDNN (its legacy convolution API: descriptors, cudnnGet*_v7 heuristics,
// cudnnConvolutionForward/BackwardData/BackwardFilter/BackwardBias), for every ConvGeometry:
// any kernel, stride, padding, dilation, groups (cudnnSetConvolutionGroupCount), NCHW fp32.
//
// cuDNN is loaded at run time (dlopen of libcudnn.so.<major>, the shim that loads cuDNN's
// engine libraries on first use) rather than linked: the binaries then start on a machine
// without cuDNN, and the CUDA backend uses its own kernels there. Only a build with
// LOOM_HAVE_CUDNN (CMake found cudnn.h and libcudnn) has this path; without it open() says so.
//
// Per geometry (the whole ConvGeometry, batch included) the tensor, filter and convolution
// descriptors and each direction's algorithm are made once and cached. The algorithm is the
// first of cuDNN's heuristic ranking (cudnnGet*Algorithm_v7) that is deterministic, fits the
// workspace limit and keeps fp32 precision (FMA math unless TF32 was allowed): a function of
// the geometry and the GPU, so two runs pick the same algorithm and give the same bits.
// cudnnFind* would time every algorithm instead, with buffers it allocates itself outside
// loom's pool, and could pick differently from run to run.
//
// Thread use: one cuDNN handle per lane (the backend's compute and side streams), each bound
// to its stream; the cache is shared and locked.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "loom/tensor/backend.h"

namespace loom::cuda {

// What one call needs from the backend: the calling thread's lane (0 compute, 1 side), its
// stream, and device workspace of at least n bytes valid in that stream's order until the
// lane's next workspace request (the backend's scratch buffer); `operands`, a second such
// buffer, holds the low-precision copies of a bf16 or fp16 call's tensors.
struct CudnnLane {
  int index = 0;
  cudaStream_t stream = nullptr;
  std::function<void*(size_t)> workspace;
  std::function<void*(size_t)> operands;
};

struct CudnnStats {
  int64_t calls = 0;     // convolution calls cuDNN ran (forward, backward data, weights)
  int64_t declined = 0;  // calls left to loom's kernels (see CudnnConv::forward)
  int64_t plans = 0;     // geometries with cached descriptors
};

// A geometry as text for error messages: "batch 2, in 4x9x7, out 6x5x6, kernel 3x2, ...".
std::string describe_conv(const ConvGeometry& g);

class CudnnConv {
 public:
  // Opens cuDNN on `device` (loads the library once per process): null, with the reason in
  // *why, when this build has no cuDNN or the library cannot be loaded. Cheap: handles are
  // made on each lane's first call. tf32 lets cuDNN use TF32 tensor cores (LOOM_CUDA_TF32).
  static std::unique_ptr<CudnnConv> open(int device, bool tf32, std::string* why);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  // The loaded library's version, "9.19.0".
  std::string version() const;
  // Makes the lane's handle if it has none yet (this loads cuDNN's engine libraries): false,
  // with cuDNN's reason in *why, when cuDNN cannot run here.
  bool ready(const CudnnLane& lane, std::string* why);

  // Whether cuDNN takes the geometry: its descriptors (made and cached here; host work, no
  // handle or GPU needed) fit and give the geometry's output size. The calls below may still
  // decline it when no algorithm passes.
  bool takes(const ConvGeometry& g, Precision precision = Precision::kFp32);

  // `precision` (Backend::matmul_precision): fp32, or bf16 / fp16, in which x, w and dy are
  // rounded (nearest even) into lane.operands, cuDNN convolves with its PSEUDO_BFLOAT16 /
  // PSEUDO_HALF configuration (low-precision tensors, fp32 accumulation: CUDNN_DATA_FLOAT
  // compute type) into a low-precision y, dx or dw there, which is widened into the fp32
  // output; the bias add and the bias gradient run in fp32. Each precision of a geometry has
  // its own plan and algorithms (tensor-core math allowed in bf16 and fp16).
  // Each returns false, having queued nothing, when cuDNN declines the geometry: a size past
  // cuDNN's int range, an output size other than PyTorch's rule gives (cuDNN computes its own),
  // no deterministic fp32 algorithm within the workspace limit, or the chosen algorithm
  // refused at its call (CUDNN_STATUS_NOT_SUPPORTED*; that direction of the geometry is then
  // declined from now on). The caller then runs its
  // own kernels. cuDNN errors throw loom::Error naming the call and the geometry.
  // y = conv(x, w) + bias (bias may be null).
  bool forward(const CudnnLane& lane, const ConvGeometry& g, const float* x, const float* w,
               const float* bias, float* y, Precision precision = Precision::kFp32);
  // dx = conv^T(dy, w), overwritten.
  bool backward_data(const CudnnLane& lane, const ConvGeometry& g, const float* w, const float* dy,
                     float* dx, Precision precision = Precision::kFp32);
  // dw, and dbias when not null, overwritten.
  bool backward_weights(const CudnnLane& lane, const ConvGeometry& g, const float* x,
                        const float* dy, float* dw, float* dbias,
                        Precision precision = Precision::kFp32);

  CudnnStats stats() const;
  // The largest workspace an algorithm may ask for: a faster algorithm that needs more is
  // passed over for the next in cuDNN's ranking.
  static constexpr size_t kWorkspaceLimit = size_t(256) << 20;

 private:
  struct Impl;
  explicit CudnnConv(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::cuda
