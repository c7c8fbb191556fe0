// `loom train` on the nccl transport (one GPU, one worker: NCCL needs a GPU per rank) against
// the same run on the CPU: the same samples and dropout masks, cuBLAS's summation order, so the
// parameters agree to a reassociation budget; and the loss falls. Needs Fashion-MNIST
// (LOOM_FASHION_MNIST_DIR, else the default directory): skipped without it or without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "common/tiny_run.h"
#include "loom/data/sources/dataset.h"
#include "loom/train/trainer.h"
#include "tensor_cuda/gpu_compare.h"

namespace loom::test {
namespace {

TEST(NcclTraining, OneGpuWorkerMatchesTheCpuRun) {
  LOOM_REQUIRE_GPU();
  const char* env = std::getenv("LOOM_FASHION_MNIST_DIR");
  const std::string dir = env ? env : data::kDefaultFashionMnistDir;
  if (!std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "no Fashion-MNIST in " << dir << " (set LOOM_FASHION_MNIST_DIR)";
  Config cpu = loom::testing::tiny_run(1, 64, 30);
  cpu.set("data.dir", dir);
  cpu.set("eval", true);
  cpu.set("transport", std::string("thread"));
  Config gpu = cpu;
  gpu.set("transport", std::string("nccl"));
  gpu.set("backend", std::string("cuda"));
  const train::TrainResult a = train::run_training(plan::read_run_plan(cpu));
  const train::TrainResult b = train::run_training(plan::read_run_plan(gpu));
  ASSERT_EQ(b.steps, 30);
  EXPECT_LT(loom::testing::max_abs_diff(a.final_params, b.final_params), 1e-3);
  ASSERT_EQ(b.epochs.size(), 1u);
  EXPECT_LT(b.epochs[0].train_loss, 2.0);  // from ln(10) = 2.30 untrained
  EXPECT_NEAR(a.test_acc, b.test_acc, 0.01);
}

// The same run with bf16 and fp16 matrix products (fp16 with its default dynamic loss scaling
// from 2^16, skipping any step that overflows): the loss falls as in fp32 and the test
// accuracy agrees.
TEST(NcclTraining, LowPrecisionTrainsAsFp32Does) {
  LOOM_REQUIRE_GPU();
  const char* env = std::getenv("LOOM_FASHION_MNIST_DIR");
  const std::string dir = env ? env : data::kDefaultFashionMnistDir;
  if (!std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "no Fashion-MNIST in " << dir << " (set LOOM_FASHION_MNIST_DIR)";
  Config fp32 = loom::testing::tiny_run(1, 64, 60);
  fp32.set("data.dir", dir);
  fp32.set("eval", true);
  fp32.set("transport", std::string("nccl"));
  fp32.set("backend", std::string("cuda"));
  const train::TrainResult reference = train::run_training(plan::read_run_plan(fp32));
  for (const char* p : {"bf16", "fp16"}) {
    SCOPED_TRACE(p);
    if (!Gpu::get()
             .backend
             ->matmul_precision_unsupported(std::string(p) == "bf16" ? Precision::kBf16
                                                                     : Precision::kFp16)
             .empty())
      continue;
    Config low = fp32;
    low.set("precision", std::string(p));
    const train::TrainResult r = train::run_training(plan::read_run_plan(low));
    ASSERT_EQ(r.steps, 60);
    ASSERT_EQ(r.epochs.size(), 1u);
    EXPECT_LT(r.epochs[0].train_loss, 2.0);
    EXPECT_NEAR(r.epochs[0].train_loss, reference.epochs[0].train_loss,
                0.1 * reference.epochs[0].train_loss);
    EXPECT_NEAR(r.test_acc, reference.test_acc, 0.03);
  }
}

}  // namespace
}  // namespace loom::test
