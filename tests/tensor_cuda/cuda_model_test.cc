// A whole training step of the zoo's MLP (with dropout) on the CUDA backend against the CPU
// backend, from the same parameters and batch: the loss, the correct count and the updated
// parameters agree within the GEMM budget, and the dropout masks are the same bits (a mask
// that differed would move the loss far past the budget). Skipped without a GPU.
#include <gtest/gtest.h>

#include "loom/core/config.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/optim/optimizer.h"
#include "loom/plan/model_reader.h"
#include "loom/plan/optim_reader.h"
#include "tensor_cuda/gpu_compare.h"

namespace loom::test {
namespace {

struct StepResult {
  double loss = 0;
  int64_t correct = 0;
  std::vector<float> params;
};

StepResult train_steps(Backend& be, int steps) {
  const Config cfg = Config::from_string(
      "mlp.hidden = [256, 128]\nmlp.dropout = 0.5\n"
      "optim.name = \"sgd\"\noptim.momentum = 0.9\n");
  auto model = nn::build_model(plan::read_model_spec(cfg), be, {1, 28, 28}, 10);
  model->init_params(123);
  auto opt = optim::make_optimizer(plan::read_optimizer_options(cfg), be, model->num_params());
  const int64_t batch = 64;
  auto x = random_floats(size_t(batch * 784), 30);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) labels[size_t(i)] = int32_t((i * 7) % 10);
  auto dx = upload(be, x);
  auto dl = upload(be, labels);
  StepResult r;
  for (int s = 0; s < steps; ++s) {
    nn::StepInfo info{true, derive_key(1, 0, RngPurpose::kDropout, uint64_t(s)), s * batch};
    model->forward(dx.data(), batch, info);
    auto loss = model->loss(dl.data(), 1.0f / float(batch));
    r.loss = loss.loss_sum;
    r.correct = loss.correct;
    model->backward();
    opt->step(model->params(), model->grads(), model->num_params(), 0.05f);
  }
  r.params.resize(size_t(model->num_params()));
  be.copy_to_host(r.params.data(), model->params(), r.params.size() * sizeof(float));
  return r;
}

TEST(CudaModel, MlpTrainingStepsMatchCpu) {
  LOOM_REQUIRE_GPU();
  const StepResult on_cpu = train_steps(cpu_backend(), 3);
  const StepResult on_gpu = train_steps(*Gpu::get().backend, 3);
  EXPECT_NEAR(on_gpu.loss, on_cpu.loss, 1e-4 * on_cpu.loss);
  EXPECT_EQ(on_gpu.correct, on_cpu.correct);
  EXPECT_NMSE_LE(on_gpu.params, on_cpu.params, kNmseGemm);
}

}  // namespace
}  // namespace loom::test
