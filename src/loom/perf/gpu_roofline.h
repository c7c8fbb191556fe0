// A training step on a GPU from what a datasheet gives: per layer, the FLOPs it executes over
// the attainable peak of the math it runs in; the layers between the products (normalisation,
// activations, residual adds, softmax, dropout) as bytes over the attainable memory bandwidth;
// and a fixed time per kernel, which is what makes small per-GPU batches reach less.
//
//   step = batch x (sum over layers of flops / (peak(math) x eff(math))
//                   + elementwise bytes x (activation bytes / 4) / (bandwidth x memory))
//          + kernels x kernel_s
//
// Attainable peaks: the datasheet figure of the precision a layer actually runs in (catalog
// peaks_source) times the share of it a large GEMM measures on that GPU (fp32_gemm_fraction,
// tensor_gemm_fraction; gemm_source), times a fitted efficiency per kind of unit: FP32 CUDA
// cores, or tensor cores (TF32, FP16/BF16, FP8). Where the FP32 figure counts a datapath shared
// with INT32 (fp32_dual_issue), convolutions are charged one datapath: half the figure. Before
// Volta (compute capability below 7.0) every INT32 instruction, a kernel's index and address
// arithmetic included, issues on the FP32 cores themselves; Volta added separate INT32 cores
// that run alongside ("Unlike Pascal GPUs, which could not execute FP32 and INT32 instructions
// simultaneously, the Volta GV100 SM includes separate FP32 and INT32 cores", NVIDIA Tesla V100
// GPU Architecture whitepaper, 2017, "Volta SM"). So FP32 cores have two fitted efficiencies:
// with a datapath of their own, and shared with INT32. Tensor cores have two as well: Volta's
// first generation, whose products issue as HMMA.884 instructions, and the later ones, from
// Turing's HMMA.1688 on, which do twice the work per instruction (Jia et al. 2019, "Dissecting
// the NVidia Turing T4 GPU via Microbenchmarking", arXiv:1903.07486); in the published figures
// the set holds, frameworks reach a smaller share of a V100's tensor peak than of later GPUs'
// (docs/perf.md says how much of that may be their software's). Separate
// efficiencies for convolutions and matrix products were tried and dropped: the set has too few
// fp32 matrix-product cases to fit one, and leave-one-source-out errors grew (docs/perf.md).
//
// Traffic in mixed precision: activations are 16-bit, except what PyTorch's autocast keeps in
// fp32 (layer_norm, softmax, the losses: Workload::fp32_elementwise_bytes).
//
// Memory format: tensor cores convolve channels-last (NHWC) data. A framework that keeps
// activations in NCHW, PyTorch's default memory format, has cuDNN transpose each convolution's
// operands to NHWC and its result back, on every call ("every time a convolution operation is
// called ..., the cuDNN library performs a transpose to convert the tensor into NHWC format";
// MosaicML Composer's Channels Last method card, after NVIDIA's "Tensor Core AI performance
// milestones" post, which measures channels-last ResNet-50 about 30% faster on V100 and A100).
// Per convolution and sample: the forward pass transposes its input and its output, the
// data-gradient pass the output's gradient and the input's gradient, the weight-gradient pass
// the input and the output's gradient again: three passes over the input's values and three
// over the output's, each read once and written once. Weights are small beside activations and
// not counted, and so are the transposes' kernels: cuDNN launches them inside the convolution's
// call, without the framework's per-operation overhead that the fitted time per kernel carries.
// Charged where convolutions run on the tensor cores: fp16, bf16 and TF32 ("The cuDNN library
// may use padding, folding, and NCHW-to-NHWC transformations to call the Tensor Core
// operations", cuDNN developer guide, Legacy API, "Data and Filter Formats"; TF32 is one of
// them), with the values' own size: 2 bytes, or 4 for TF32.
//
// Input channels on tensor cores: "Choose the number of input and output channels to be
// divisible by 8 (for FP16) or 4 (for TF32) to run efficiently on Tensor Cores. For the first
// convolutional layer in most CNNs where the input tensor consists of 3-channel images, padding
// to 4 channels is sufficient if a stride of 2 is used" (NVIDIA Deep Learning Performance
// documentation, Convolutional Layers User's Guide, quick-start checklist). The reference
// networks feed the image's 3 channels as they are (torchvision and tf_cnn_benchmarks pad
// nothing), so a convolution that reads the image executes as if it had 8 input channels in
// 16-bit math and 4 in TF32: 8/3 and 4/3 of its FLOPs (LayerCost::image_input_share; a
// one-channel image, 8 and 4 times). That cuDNN pads to the guide's multiples rather than run
// such a layer some slower way is assumed; the first layer is 2.9% of ResNet-50's FLOPs and 10%
// of AlexNet's.
//
// L2 cache: a value one kernel writes is read by the next from L2, not memory, when the tensor
// still sits there; the roofline counts it so when the kernel that wrote it could hold its
// output and an input of the same size at once (2 x the step's tensor <= the L2 of the
// catalog's row). Of the traffic on such a tensor it takes half off memory: by the rules of
// scripts/workload-traffic the reads of values the kernel before wrote are 5 of BatchNorm's 8
// values, 2 of a ReLU's 5 and 3 of a residual add's 6; the writes, and the reads of values kept
// from the forward pass for backward, still go to memory. Served from L2 is counted as free
// (its bandwidth is several times memory's, and no datasheet gives it). This is what makes a
// small batch on a large L2 (Ada's 72 MB, the A100's 40 MB) faster per sample than the same GPU
// at a batch whose tensors spill; GPUs before Ampere (1.5-6 MB) hold only the smallest
// tensors of small batches. Traffic a workload does not list by tensor
// (Workload::elementwise_by_tensor), NCHW's transposes and GPUs without an L2 figure count none.
//
// Weights: a product reads its weights in the forward pass and for the input's gradient, and
// writes a gradient of their size: three passes over them a step, whatever the batch, in the
// activations' precision (mixed precision's 16-bit copy). A layer takes the longer of its math
// (at the fit's efficiency) and those passes (at the memory efficiency); the passes overlap the
// math, so they cost only where they are the longer: the large matrices of a fully connected
// layer at a small batch (AlexNet's and VGG-16's classifiers at batch 16), a layer with few
// FLOPs a weight. Its activations' reads and writes are not charged there (the layers between
// the products move them), nor layers without math (an embedding reads only the rows it looks
// up; BatchNorm's scale and shift are a value a channel).
#pragma once

#include <string>
#include <vector>

#include "loom/perf/catalog.h"
#include "loom/perf/workload.h"

namespace loom::perf {

// What a step computes in on one GPU: the math of its convolutions and of its other matrix
// products (fp32, tf32, fp16, bf16, fp8), and the bytes of an activation value.
struct MathPlan {
  std::string requested;  // the precision asked for
  std::string conv, gemm;
  double act_bytes = 4;
  // The activations' memory format: "nhwc" (channels-last: TensorFlow's default, PyTorch's
  // torch.channels_last) or "nchw" (PyTorch's default).
  std::string layout = "nhwc";
  // cuDNN transposes each convolution's operands and result (the memory format, above).
  bool transposes() const;
  // "fp32", "tf32", "mixed" (16-bit tensor math) or "fp8": the class of [[rate]] rows that
  // describe this plan.
  std::string rate_class() const;
  // "convolutions tf32, matrix products fp32".
  std::string describe() const;
};

// Precisions as `--precision` takes them:
//   fp32     every product on FP32 cores (TF32 off)
//   tf32     every product in TF32 where the GPU has it
//   default  what PyTorch does without being told (since 1.12): convolutions in TF32 where the
//            GPU has it (torch.backends.cudnn.allow_tf32 = True), other matrix products in fp32
//            (torch.backends.cuda.matmul.allow_tf32 = False)
//   bf16, fp16  mixed precision: products and activations in 16 bits, fp32 master weights
//   mixed    bf16 from compute capability 8.0, fp16 on 7.x (loom_precision in catalog.h)
//   fp8      matrix products in FP8 (Transformer Engine), convolutions in bf16
// A math the GPU has no tensor cores for runs on its FP32 cores. `layout`: nhwc or nchw.
// InputError for an unknown name.
MathPlan math_plan(const GpuSpec& g, const std::string& precision,
                   const std::string& layout = "nhwc");
bool is_layout(const std::string& layout);
inline constexpr const char* kLayoutNames = "nhwc (channels-last) or nchw";
bool is_precision(const std::string& precision);
// Activations and gradients in 16 bits (or fewer).
bool is_low_precision(const std::string& precision);
inline constexpr const char* kPrecisionNames = "fp32, tf32, default, bf16, fp16, mixed or fp8";

// The roofline's fitted parameters (validation_set.h lists the cases each is fitted on).
struct ComputeFit {
  double cuda = 0.5;          // attained fraction of the FP32 CUDA-core peak (Volta and later)
  double cuda_shared = 0.5;   // the same where INT32 issues on the FP32 cores (before Volta)
  double tensor = 0.5;        // attained fraction of a tensor-core peak (Turing and later)
  double tensor_volta = 0.5;  // the same on Volta's first-generation tensor cores
  double memory = 0.8;        // attained fraction of memory bandwidth
  double kernel_s = 5e-6;     // launch and tail per kernel of a step
  bool operator==(const ComputeFit&) const = default;
};

// "FP32 cores 45% (41% before Volta), tensor cores 57% (40% on Volta), memory 80%, 6.0 us a
// kernel".
std::string describe(const ComputeFit& f);

// Fitted on the single-GPU cases of data/hardware/validation.toml and the catalog's [[rate]]
// rows (tests/perf/validation_test.cc refits it and checks these values).
inline constexpr ComputeFit kComputeFit{0.77, 0.53, 0.72, 0.39, 0.8, 22.0e-6};

// The units a product's math runs on, each with its fitted efficiency (ComputeFit).
enum class MathUnit { kCuda, kCudaShared, kTensor, kTensorVolta };

// A product that may wait on its weights (weights, above), per sample at efficiency 1: its math
// on `unit` and its passes over its weights at the datasheet bandwidth.
struct WeightPasses {
  MathUnit unit = MathUnit::kCuda;
  double math_s = 0;
  double passes_s = 0;
};

// A step's parts at efficiency 1, so a fit can weigh them without recomputing the layers.
struct RooflineParts {
  double cuda_s = 0;          // per sample: FLOPs on FP32 cores over their peak
  double cuda_shared_s = 0;   // the same on FP32 cores shared with INT32 (before Volta)
  double tensor_s = 0;        // per sample: FLOPs on tensor cores over their peaks
  double tensor_volta_s = 0;  // the same on Volta's tensor cores
  double memory_s = 0;        // per sample: elementwise bytes over the datasheet bandwidth
  double transpose_s = 0;     // the part of memory_s that is NCHW's transposes
  double l2_share = 0;        // of the elementwise traffic, the share on tensors L2 holds
  double kernels = 0;         // per step
  // Every product with weights, at a known batch.
  std::vector<WeightPasses> weights;
  double products_s(const ComputeFit& f) const {
    return cuda_s / f.cuda + cuda_shared_s / f.cuda_shared + tensor_s / f.tensor +
           tensor_volta_s / f.tensor_volta;
  }
  // Per sample: what the products' passes over their weights take beyond their math, layer by
  // layer at the fit's efficiencies (weights, above).
  double weights_s(const ComputeFit& f) const;
  double at_peak_s() const { return cuda_s + cuda_shared_s + tensor_s + tensor_volta_s; }
  double sample_s(const ComputeFit& f) const {
    return products_s(f) + memory_s / f.memory + weights_s(f);
  }
  double step_s(const ComputeFit& f, double batch) const {
    return batch * sample_s(f) + kernels * f.kernel_s;
  }
  bool memory_bound(const ComputeFit& f) const { return memory_s / f.memory > products_s(f); }
};

// At `batch` samples a step (per GPU and micro-step); batch 0 holds no tensor in L2 and
// charges no weights.
RooflineParts roofline_parts(const GpuSpec& g, const Workload& w, const MathPlan& m,
                             double batch = 0);

// Passes a training step makes over a product's weights: forward and the input's gradient read
// them, the weights' gradient writes a tensor of their size.
inline constexpr double kWeightPasses = 3;

// A tensor is held when this many times its size fits the L2 (its writer's input and output),
// and of the traffic on held tensors this share comes off memory (above).
inline constexpr double kL2HeldTensors = 2;
inline constexpr double kL2ServedShare = 0.5;
// The share of w's elementwise traffic whose tensors, at `batch` samples of `act_bytes` values,
// the L2 of g holds for the next kernel (above).
double l2_held_share(const GpuSpec& g, const Workload& w, double act_bytes, double batch);

// What NCHW's transposes add to a step of `w` on `g` with activations of `act_bytes`, per sample
// at the datasheet bandwidth (a fit's memory efficiency divides it).
double nchw_transpose_s(const GpuSpec& g, const Workload& w, double act_bytes);

}  // namespace loom::perf
