#include "loom/perf/gpu_roofline.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "loom/core/error.h"
#include "loom/perf/compute_fit.h"
#include "loom/perf/compute_model.h"

namespace loom::perf {
namespace {

const Catalog& cat() {
  static const Catalog c = Catalog::builtin();
  return c;
}

TEST(MathPlan, PrecisionsAsFrameworksRunThem) {
  const GpuSpec& a100 = cat().gpu("a100-80gb-sxm4");
  const GpuSpec& v100 = cat().gpu("v100-sxm2");
  const GpuSpec& p100 = cat().gpu("p100-sxm2");
  // PyTorch's defaults: TF32 convolutions where the GPU has TF32, fp32 matrix products.
  EXPECT_EQ(math_plan(a100, "default").conv, "tf32");
  EXPECT_EQ(math_plan(a100, "default").gemm, "fp32");
  EXPECT_EQ(math_plan(a100, "default").rate_class(), "tf32");
  EXPECT_EQ(math_plan(v100, "default").conv, "fp32");
  EXPECT_EQ(math_plan(v100, "default").rate_class(), "fp32");
  EXPECT_EQ(math_plan(a100, "mixed").gemm, "bf16");
  EXPECT_EQ(math_plan(v100, "mixed").gemm, "fp16");
  EXPECT_EQ(math_plan(v100, "bf16").gemm, "fp32");  // no bf16 tensor cores before 8.0
  EXPECT_EQ(math_plan(p100, "fp16").gemm, "fp32");  // no tensor cores
  EXPECT_EQ(math_plan(a100, "fp8").gemm, "bf16");   // no fp8 before Ada and Hopper
  EXPECT_EQ(math_plan(cat().gpu("h100-sxm"), "fp8").gemm, "fp8");
  EXPECT_EQ(math_plan(a100, "bf16").act_bytes, 2);
  EXPECT_EQ(math_plan(a100, "tf32").act_bytes, 4);
  EXPECT_THROW(math_plan(a100, "fp64"), InputError);
}

TEST(GpuRoofline, EveryCatalogGpuHasItsPeaksPerPrecisionWithASource) {
  for (const auto& [name, g] : cat().gpus()) {
    EXPECT_FALSE(g.peaks_source.empty()) << name;
    if (g.vendor == "nvidia" && g.cuda_cc >= 8.0) {
      EXPECT_GT(g.tf32_tflops, 0) << name;
    }
    if (g.vendor == "nvidia" && g.cuda_cc >= 8.9) {
      EXPECT_GT(g.fp8_tflops, 0) << name;
    }
    if (g.tf32_tflops > 0) {
      EXPECT_LT(g.tf32_tflops, g.tensor_tflops) << name;
    }
  }
}

// A convolution in fp32 on a chip whose FP32 figure counts the datapath shared with INT32
// gets half the figure; a matrix product gets what a large SGEMM measures of all of it.
TEST(GpuRoofline, DualIssueFp32HalvesConvolutionsOnly) {
  GpuSpec g = cat().gpu("rtx-3090");
  ASSERT_TRUE(g.fp32_dual_issue);
  Workload conv, gemm;
  conv.layers = {{"c", 0, 1e9, 0, ProductKind::kConv}};
  gemm.layers = {{"g", 0, 1e9, 0, ProductKind::kGemm}};
  const MathPlan plan = math_plan(g, "fp32");
  const double peak = g.fp32_tflops * 1e12;
  // A matrix product: the figure times what a large SGEMM measures of it.
  EXPECT_DOUBLE_EQ(roofline_parts(g, gemm, plan).cuda_s, 3e9 / (peak * g.fp32_gemm_fraction));
  // A convolution: one datapath.
  EXPECT_DOUBLE_EQ(roofline_parts(g, conv, plan).cuda_s, 3e9 / (peak / 2));
  g.fp32_dual_issue = false;
  EXPECT_DOUBLE_EQ(roofline_parts(g, conv, plan).cuda_s, 3e9 / (peak * g.fp32_gemm_fraction));
}

// A convolution reading the image's 3 channels runs on tensor cores as if it had 8 (16-bit) or
// 4 (TF32); FP32 cores and the layers after it execute what they count.
TEST(GpuRoofline, TensorCoresPadTheImagesThreeChannels) {
  const GpuSpec& g = cat().gpu("a100-80gb-sxm4");
  Workload image, inner, half;
  image.layers = {{"c", 0, 1e9, 0, ProductKind::kConv, 1}};
  inner.layers = {{"c", 0, 1e9, 0, ProductKind::kConv, 0}};
  half.layers = {{"c", 0, 1e9, 0, ProductKind::kConv, 0.5}};
  const auto tensor_s = [&](const Workload& w, const char* p) {
    return roofline_parts(g, w, math_plan(g, p)).tensor_s;
  };
  for (const char* p : {"bf16", "fp16", "fp8"})
    EXPECT_DOUBLE_EQ(tensor_s(image, p), tensor_s(inner, p) * 8 / 3) << p;
  EXPECT_DOUBLE_EQ(tensor_s(image, "tf32"), tensor_s(inner, "tf32") * 4 / 3);
  EXPECT_DOUBLE_EQ(tensor_s(half, "bf16"), tensor_s(inner, "bf16") * (1 + 0.5 * 5 / 3));
  EXPECT_DOUBLE_EQ(roofline_parts(g, image, math_plan(g, "fp32")).cuda_s,
                   roofline_parts(g, inner, math_plan(g, "fp32")).cuda_s);
  // The reference CNNs mark the convolution that reads the image; a transformer has none.
  for (const char* name : {"resnet50", "alexnet"}) {
    const Workload w = reference_workload(name);
    EXPECT_EQ(w.layers.front().image_input_share, 1) << name;
  }
  for (const auto& l : reference_workload("bert-large").layers) EXPECT_EQ(l.image_input_share, 0);
  // A one-channel image (loom's CNN on Fashion-MNIST) pads to 8 in bf16: 8 times its FLOPs.
  Workload gray = image;
  gray.layers[0].image_channels = 1;
  EXPECT_DOUBLE_EQ(tensor_s(gray, "bf16"), tensor_s(inner, "bf16") * 8);
  EXPECT_DOUBLE_EQ(tensor_s(gray, "tf32"), tensor_s(inner, "tf32") * 4);
  EXPECT_EQ(cnn_workload(64, "cnn").layers.front().image_input_share, 1);
  EXPECT_EQ(cnn_workload(64, "cnn").layers[1].image_input_share, 0);
}

// Before Volta, FP32 work goes to the part fitted for FP32 cores that INT32 shares; from Volta
// on (and on a GPU of unknown capability), to the one for FP32 cores of their own.
TEST(GpuRoofline, PreVoltaFp32IsChargedToTheSharedCores) {
  Workload w;
  w.layers = {{"c", 0, 1e9, 0, ProductKind::kConv}};
  GpuSpec pascal = cat().gpu("gtx-1080-ti");
  GpuSpec volta = cat().gpu("v100-sxm2");
  ASSERT_LT(pascal.cuda_cc, 7.0);
  const RooflineParts p = roofline_parts(pascal, w, math_plan(pascal, "fp32"));
  EXPECT_GT(p.cuda_shared_s, 0);
  EXPECT_EQ(p.cuda_s, 0);
  const RooflineParts v = roofline_parts(volta, w, math_plan(volta, "fp32"));
  EXPECT_GT(v.cuda_s, 0);
  EXPECT_EQ(v.cuda_shared_s, 0);
  ComputeFit f = kComputeFit;
  f.cuda_shared = f.cuda / 2;
  EXPECT_DOUBLE_EQ(p.products_s(f), p.cuda_shared_s / f.cuda_shared);
  pascal.cuda_cc = 0;
  EXPECT_EQ(roofline_parts(pascal, w, math_plan(pascal, "fp32")).cuda_shared_s, 0);
}

// A product's passes over its weights cost what they take beyond its math: a wide fully
// connected layer at batch 1 waits on them, at batch 4096 not; mixed precision moves half the
// bytes; without a batch nothing is charged.
TEST(GpuRoofline, WeightsCostWhereTheyOutlastTheMath) {
  const GpuSpec& g = cat().gpu("gtx-1080-ti");
  Workload w;
  const double params = 4096.0 * 9216;
  w.layers = {{"fc6", params, 2 * params, 0, ProductKind::kGemm}};
  const MathPlan fp32 = math_plan(g, "fp32");
  const RooflineParts at1 = roofline_parts(g, w, fp32, 1);
  const double passes_s = kWeightPasses * params * 4 / (g.mem_bw_gbs * 1e9 * kComputeFit.memory);
  const double math_s = at1.products_s(kComputeFit);
  ASSERT_GT(passes_s, math_s);
  EXPECT_NEAR(at1.weights_s(kComputeFit), passes_s - math_s, 1e-12);
  EXPECT_NEAR(at1.sample_s(kComputeFit), passes_s, 1e-12);
  EXPECT_EQ(roofline_parts(g, w, fp32, 4096).weights_s(kComputeFit), 0);
  EXPECT_TRUE(roofline_parts(g, w, fp32).weights.empty());
  const GpuSpec& a100 = cat().gpu("a100-80gb-sxm4");
  const RooflineParts half = roofline_parts(a100, w, math_plan(a100, "bf16"), 1);
  const double half_passes =
      kWeightPasses * params * 2 / (a100.mem_bw_gbs * 1e9 * kComputeFit.memory);
  EXPECT_NEAR(half.weights_s(kComputeFit), half_passes - half.products_s(kComputeFit), 1e-12);
  // A lower memory efficiency makes the same passes longer; a higher efficiency of the math
  // leaves more of them exposed.
  ComputeFit slow = kComputeFit;
  slow.memory /= 2;
  EXPECT_GT(at1.weights_s(slow), at1.weights_s(kComputeFit));
  ComputeFit fast = kComputeFit;
  fast.cuda_shared = 1;
  EXPECT_NEAR(at1.weights_s(fast), passes_s - at1.products_s(fast), 1e-12);
  // Each layer against its own math: a layer with much math beside it hides none of the wide
  // layer's passes.
  Workload two = w;
  two.layers.push_back({"conv", 1e3, 1e12, 0, ProductKind::kConv});
  EXPECT_NEAR(roofline_parts(g, two, fp32, 1).weights_s(kComputeFit), passes_s - math_s, 1e-12);
  // A layer without math (an embedding's table) is not charged.
  Workload table;
  table.layers = {{"embedding", params, 0, 0, ProductKind::kGemm}};
  EXPECT_TRUE(roofline_parts(g, table, fp32, 1).weights.empty());
}

// Mixed precision halves the traffic between the products, but not what autocast keeps in
// fp32; a fixed time per kernel makes small batches slower per sample.
TEST(GpuRoofline, TrafficAndKernels) {
  const GpuSpec& g = cat().gpu("a100-80gb-sxm4");
  Workload w;
  w.layers = {{"g", 0, 1e9, 0}};
  w.elementwise_bytes = 1e9;
  w.fp32_elementwise_bytes = 0.25e9;
  w.kernels = 100;
  const RooflineParts fp32 = roofline_parts(g, w, math_plan(g, "fp32"));
  const RooflineParts bf16 = roofline_parts(g, w, math_plan(g, "bf16"));
  EXPECT_DOUBLE_EQ(fp32.memory_s, 1e9 / (g.mem_bw_gbs * 1e9));
  EXPECT_DOUBLE_EQ(bf16.memory_s, (0.75e9 / 2 + 0.25e9) / (g.mem_bw_gbs * 1e9));
  EXPECT_GT(bf16.tensor_s, 0);
  EXPECT_EQ(bf16.cuda_s, 0);
  const ComputeFit f = kComputeFit;
  EXPECT_GT(fp32.step_s(f, 8) / 8, fp32.step_s(f, 256) / 256);
}

// NCHW costs three read-and-write passes over every convolution's input and output values,
// only where convolutions run on the tensor cores (16-bit or TF32).
TEST(GpuRoofline, NchwTransposesTensorCoreConvolutionsOnly) {
  const GpuSpec& v100 = cat().gpu("v100-sxm2");
  const GpuSpec& a100 = cat().gpu("a100-80gb-sxm4");
  const Workload w = reference_workload("resnet50");
  ASSERT_GT(w.conv_io_values, 0);
  const RooflineParts nhwc = roofline_parts(v100, w, math_plan(v100, "fp16", "nhwc"));
  const RooflineParts nchw = roofline_parts(v100, w, math_plan(v100, "fp16", "nchw"));
  const double transposes = 3 * 2 * 2 * w.conv_io_values / (v100.mem_bw_gbs * 1e9);
  EXPECT_EQ(nhwc.transpose_s, 0);
  EXPECT_DOUBLE_EQ(nchw.transpose_s, transposes);
  EXPECT_DOUBLE_EQ(nchw.memory_s, nhwc.memory_s + transposes);
  EXPECT_DOUBLE_EQ(nchw.kernels, nhwc.kernels);
  EXPECT_DOUBLE_EQ(nchw.tensor_volta_s, nhwc.tensor_volta_s);  // the products are the same
  EXPECT_TRUE(math_plan(a100, "bf16", "nchw").transposes());
  // TF32 convolutions run on the tensor cores too: their transposes move 4-byte values.
  for (const char* precision : {"tf32", "default"}) {
    const RooflineParts t32 = roofline_parts(a100, w, math_plan(a100, precision, "nchw"));
    EXPECT_TRUE(math_plan(a100, precision, "nchw").transposes()) << precision;
    EXPECT_DOUBLE_EQ(t32.transpose_s, 3 * 2 * 4 * w.conv_io_values / (a100.mem_bw_gbs * 1e9))
        << precision;
  }
  // FP32 convolutions on the FP32 cores and a network without convolutions pay nothing.
  EXPECT_FALSE(math_plan(a100, "fp32", "nchw").transposes());
  EXPECT_EQ(roofline_parts(a100, w, math_plan(a100, "fp32", "nchw")).memory_s,
            roofline_parts(a100, w, math_plan(a100, "fp32", "nhwc")).memory_s);
  const Workload bert = reference_workload("bert-large");
  EXPECT_EQ(roofline_parts(a100, bert, math_plan(a100, "bf16", "nchw")).memory_s,
            roofline_parts(a100, bert, math_plan(a100, "bf16", "nhwc")).memory_s);
  EXPECT_NE(math_plan(v100, "fp16", "nchw").describe().find("NCHW"), std::string::npos);
  EXPECT_NE(compute_rate(cat(), cat().gpu("rtx-4090"), w, "bf16", 64, kComputeFit, "", "nchw")
                .detail.find("NCHW's transposes"),
            std::string::npos);
  EXPECT_THROW(math_plan(v100, "fp16", "chwn"), InputError);
}

// TF32 convolutions in NCHW pay the transposes; where the FP32 cores are as fast as the TF32
// tensor cores (an RTX 4090: 82.6 TFLOPS each) cuDNN's FP32 kernels win and are what is charged,
// and where they are not (an A100: 19.5 against 156) TF32 stays.
TEST(ComputeRate, Tf32IsAllowedNotForcedInNchw) {
  const Workload w = reference_workload("resnet50");
  const Catalog& c = cat();
  const auto rate = [&](const char* gpu, const char* precision, const char* layout) {
    return compute_rate(c, c.gpu(gpu), w, precision, 64, kComputeFit, "", layout);
  };
  const ComputeRate ada = rate("rtx-4090", "default", "nchw");
  ASSERT_EQ(ada.method, "roofline");
  EXPECT_DOUBLE_EQ(ada.sample_s, rate("rtx-4090", "fp32", "nchw").sample_s);
  EXPECT_NE(ada.math.find("TF32 allowed"), std::string::npos) << ada.math;
  // What it avoids: the TF32 plan with its transposes is slower.
  const MathPlan tf32 = math_plan(c.gpu("rtx-4090"), "default", "nchw");
  EXPECT_GT(roofline_parts(c.gpu("rtx-4090"), w, tf32).sample_s(kComputeFit), ada.sample_s);
  // Channels-last has no transposes: TF32 is faster there.
  EXPECT_LT(rate("rtx-4090", "default", "nhwc").sample_s, ada.sample_s);
  const ComputeRate ampere = rate("a100-80gb-sxm4", "default", "nchw");
  EXPECT_LT(ampere.sample_s, rate("a100-80gb-sxm4", "fp32", "nchw").sample_s);
  EXPECT_EQ(ampere.math.find("TF32 allowed"), std::string::npos) << ampere.math;
}

// A published rate measured channels-last stands for an NCHW run once the transposes are
// added, and one measured in NCHW for a channels-last run once they are taken off; fp32 rates
// stay as they are.
TEST(ComputeRate, ARateInTheOtherLayoutGainsOrLosesTheTransposes) {
  Catalog c = cat();
  c.load_text(R"(
[[rate]]
gpu = "v100-sxm2"
workload = "resnet101"
precision = "mixed"
batch = 128
samples_per_s = 700
layout = "nhwc"
source = "planted: channels-last"

[[rate]]
gpu = "v100-sxm2"
workload = "resnet101"
precision = "fp32"
batch = 128
samples_per_s = 200
source = "planted: fp32"

[[rate]]
gpu = "a100-80gb-sxm4"
workload = "resnet101"
precision = "mixed"
batch = 128
samples_per_s = 1500
layout = "nchw"
source = "planted: NCHW"
)",
              "planted.toml");
  const GpuSpec& v100 = c.gpu("v100-sxm2");
  const GpuSpec& a100 = c.gpu("a100-80gb-sxm4");
  const Workload w = reference_workload("resnet101");
  const ComputeFit f = kComputeFit;
  const double tv = nchw_transpose_s(v100, w, 2);
  const ComputeRate same = compute_rate(c, v100, w, "mixed", 128, f, "", "nhwc");
  const ComputeRate nchw = compute_rate(c, v100, w, "mixed", 128, f, "", "nchw");
  EXPECT_DOUBLE_EQ(same.sample_s, 1.0 / 700);
  EXPECT_DOUBLE_EQ(nchw.sample_s, 1.0 / 700 + tv / f.memory);
  EXPECT_NE(nchw.detail.find("transposes"), std::string::npos);
  EXPECT_DOUBLE_EQ(compute_rate(c, v100, w, "fp32", 128, f, "", "nchw").sample_s, 1.0 / 200);
  const double ta = nchw_transpose_s(a100, w, 2);
  EXPECT_DOUBLE_EQ(compute_rate(c, a100, w, "mixed", 128, f, "", "nhwc").sample_s,
                   1.0 / 1500 - ta / f.memory);
  EXPECT_DOUBLE_EQ(compute_rate(c, a100, w, "mixed", 128, f, "", "nchw").sample_s, 1.0 / 1500);
}

// The fit finds efficiencies planted in synthetic figures, and leaves a fixed-rate figure's
// unit alone when no point uses it.
TEST(ComputeFit, RecoversPlantedEfficiencies) {
  const ComputeFit planted{0.37, 0.53, 0.62, 0.44, 0.8, 12e-6};
  std::vector<FitPoint> points;
  for (int i = 0; i < 16; ++i) {
    FitPoint p;
    p.name = fmt::format("p{}", i);
    p.parts.cuda_s = i % 4 == 1 ? 1e-3 * (1 + i) : 0;
    p.parts.cuda_shared_s = i % 4 == 2 ? 8e-4 * (1 + i) : 0;
    p.parts.tensor_s = i % 4 == 0 ? 2e-4 * (1 + i) : 0;
    p.parts.tensor_volta_s = i % 4 == 3 ? 3e-4 * (1 + i) : 0;
    p.parts.memory_s = 1e-4;
    p.parts.kernels = 100 + 50 * i;
    p.samples = 16 << (i / 4);
    p.per_gpu_published = 1;
    p.per_gpu_published = p.predicted(planted);
    points.push_back(p);
  }
  const ComputeFit f = fit_compute(points);
  EXPECT_NEAR(f.cuda, planted.cuda, 1e-9);
  EXPECT_NEAR(f.cuda_shared, planted.cuda_shared, 1e-9);
  EXPECT_NEAR(f.tensor, planted.tensor, 1e-9);
  EXPECT_NEAR(f.tensor_volta, planted.tensor_volta, 1e-9);
  EXPECT_NEAR(f.kernel_s, planted.kernel_s, 1e-12);
  EXPECT_LT(mean_abs_error(points, f), 1e-9);
}

// Every L2 figure of the catalog has its source; the large caches the L2 term is for are there.
TEST(GpuRoofline, CatalogL2FiguresHaveTheirSources) {
  for (const auto& [name, g] : cat().gpus()) {
    if (g.l2_mib > 0) {
      EXPECT_FALSE(g.l2_source.empty()) << name;
    }
  }
  EXPECT_DOUBLE_EQ(cat().gpu("a100-40gb-sxm4").l2_mib, 40);
  EXPECT_DOUBLE_EQ(cat().gpu("rtx-4090").l2_mib, 72);
  EXPECT_DOUBLE_EQ(cat().gpu("h100-sxm").l2_mib, 50);
  EXPECT_LT(cat().gpu("v100-sxm2").l2_mib, 8);
}

// A tensor counts as held in L2 when twice the step's tensor fits: the kernel that wrote it
// held an input of its size too.
TEST(GpuRoofline, L2HoldsTheTensorsThatFitTwice) {
  GpuSpec g = cat().gpu("rtx-4090");
  g.l2_mib = 64;  // 2^26 bytes
  Workload w;
  w.elementwise_bytes = 100;
  w.elementwise_by_tensor = {{1024, 30}, {65536, 50}};  // 20 bytes listed nowhere
  const double mib = 1024 * 1024;
  // At 2 bytes a value: the small tensor fits up to batch 64 * mib / (2 * 2 * 1024) = 16384.
  EXPECT_DOUBLE_EQ(l2_held_share(g, w, 2, 256), 0.8);  // both: 2 * 256 * 65536 * 2 = 64 MiB
  EXPECT_DOUBLE_EQ(l2_held_share(g, w, 2, 257), 0.3);  // the large one spills
  EXPECT_DOUBLE_EQ(l2_held_share(g, w, 4, 128), 0.8);  // fp32 values fit half the batch
  EXPECT_DOUBLE_EQ(l2_held_share(g, w, 2, 64 * mib / (4 * 1024)), 0.3);
  EXPECT_DOUBLE_EQ(l2_held_share(g, w, 2, 64 * mib / (4 * 1024) + 1), 0);
  EXPECT_DOUBLE_EQ(l2_held_share(g, w, 2, 0), 0);  // no batch given: nothing held
  g.l2_mib = 0;                                    // not known: nothing held
  EXPECT_DOUBLE_EQ(l2_held_share(g, w, 2, 1), 0);

  // The roofline takes kL2ServedShare of the held traffic off memory, at every precision.
  g.l2_mib = 64;
  for (const char* precision : {"fp32", "bf16"}) {
    const MathPlan m = math_plan(g, precision);
    const RooflineParts spilled = roofline_parts(g, w, m, 1e6);
    const RooflineParts held = roofline_parts(g, w, m, 16);
    EXPECT_GT(spilled.memory_s, 0);
    EXPECT_DOUBLE_EQ(spilled.l2_share, 0);
    EXPECT_DOUBLE_EQ(held.l2_share, 0.8);
    EXPECT_NEAR(held.memory_s, spilled.memory_s * (1 - kL2ServedShare * 0.8),
                1e-12 * spilled.memory_s)
        << precision;
  }
}

// ResNet-50 in mixed precision on an RTX 4090: at batch 64 its smaller feature maps stay in the
// 72 MB L2, at 256 almost none, so a sample costs less at 64; on a V100's 6 MB neither fits,
// and the rate says what it counted.
TEST(GpuRoofline, SmallBatchesOnLargeCachesMoveLessThroughMemory) {
  const Workload w = reference_workload("resnet50");
  const auto rate = [&](const char* gpu, double batch) {
    return compute_rate(cat(), cat().gpu(gpu), w, "fp16", batch, kComputeFit, "", "nhwc");
  };
  const auto memory_per_sample = [&](const char* gpu, double batch) {
    const GpuSpec& g = cat().gpu(gpu);
    return roofline_parts(g, w, math_plan(g, "fp16"), batch).memory_s;
  };
  EXPECT_LT(memory_per_sample("rtx-4090", 64), 0.85 * memory_per_sample("rtx-4090", 256));
  EXPECT_DOUBLE_EQ(memory_per_sample("v100-sxm2", 64), memory_per_sample("v100-sxm2", 256));
  EXPECT_THAT(rate("rtx-4090", 64).detail, testing::HasSubstr("72 MiB L2 holds"));
  EXPECT_THAT(rate("v100-sxm2", 256).detail, testing::Not(testing::HasSubstr("L2")));
}

TEST(Decoder, ShapeGivesItsFlopsAndRefusesTooFewParameters) {
  DecoderShape s;
  s.name = "d";
  s.layers = 24;
  s.heads = 16;
  s.d_model = 2048;
  s.seq = 2048;
  s.vocab = 50368;
  s.params = 1.316e9;
  const Workload plain = decoder_workload(s);
  // Kaplan et al.: about 2 N + 2 n_layer n_ctx d per token forward, plus the logits.
  const double n = s.params - (s.vocab + s.seq) * s.d_model;
  EXPECT_NEAR(plain.fwd_flops(),
              s.seq * (2 * n + 2 * s.layers * s.seq * s.d_model + 2 * s.d_model * s.vocab),
              1e-6 * plain.fwd_flops());
  // Checkpointing repeats each block's forward; the logits are not checkpointed.
  const double logits = 2 * s.d_model * s.vocab * s.seq;
  s.recompute = true;
  EXPECT_NEAR(decoder_workload(s).fwd_flops(), (plain.fwd_flops() - logits) * 4 / 3 + logits,
              1e-6 * plain.fwd_flops());
  s.recompute = false;
  s.fused = true;
  EXPECT_LT(decoder_workload(s).elementwise_bytes, plain.elementwise_bytes);
  s.params = 1e6;
  EXPECT_THROW(decoder_workload(s), InputError);
}

}  // namespace
}  // namespace loom::perf
