// 1-bit Adam (Tang et al., "1-bit Adam: Communication Efficient Large-Scale Training with Adam's
// Convergence Speed", ICML 2021): Adam during a warm-up, then the variance frozen and the
// momentum exchanged through a lossy codec, with the update applied from the exchanged momentum.
//
// Error feedback on gradients fed to Adam breaks its variance, which is not linear in the
// gradient; the momentum is linear in it, so once the variance is frozen the whole update is
// linear in what the workers exchange and compression with error feedback keeps Adam's
// convergence (the paper's argument). Here:
//   - steps 1..freeze: AdamW on the exchanged (exact) gradient, bias-corrected as Adam's;
//   - after: each worker sends beta1 m / N + (1 - beta1) g_local (N workers; g_local is its
//     share of the gradient sum), so the exchanged sum is the new momentum
//     beta1 m + (1 - beta1) g over the whole batch; every worker takes that sum as m and updates
//     p <- p (1 - lr wd) - lr (m c1) / (sqrt(v c2) + eps), with c1 = 1 / (1 - beta1^t) and c2 =
//     1 / (1 - beta2^freeze): the variance and its correction as they stood at the freeze;
//     each element's step (m c1) / (sqrt(v c2) + eps) is clamped to +-adam_step_bound(): see
//     there.
// The exchange belongs to the strategy (sync/allreduce/allreduce_strategy.h); a world of one
// exchanges nothing and update() applies the same rule to its own gradient.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/optim/optimizer.h"

namespace loom::optim {

class OnebitAdam final : public Optimizer {
 public:
  // Host memory only: the frozen stage's loops run on the CPU.
  OnebitAdam(Backend& backend, int64_t num_params, float beta1, float beta2, float eps,
             float weight_decay);
  std::string describe() const override;
  // Steps 1..freeze_step(): AdamW. After: the frozen rule on `grads` as this worker's whole
  // gradient (a world of one, or a bucket summed exactly).
  void update(float* params, const float* grads, int64_t offset, int64_t n, float lr) override;
  void reset_state() override;
  std::vector<StateBuffer> state() override;

  // The last step that updates the variance (the strategy's exact warm-up, >= 1).
  void set_freeze_step(int64_t step);
  int64_t freeze_step() const { return freeze_step_; }
  bool frozen() const { return steps_ > freeze_step_; }
  // What this worker sends for [offset, offset + n): send[i] = beta1 m / world + (1 - beta1)
  // send[i] (send holds its share of the gradient on entry).
  void momentum_to_send(float* send, int64_t offset, int64_t n, int world) const;
  // The exchanged sum becomes the momentum, and the parameters take the frozen update.
  void apply_momentum(float* params, const float* momentum, int64_t offset, int64_t n, float lr);

  // The most an element's bias-corrected m / sqrt(v) can reach in Adam itself, for
  // beta1^2 < beta2: m = (1 - b1) sum b1^k g_k and v = (1 - b2) sum b2^k g_k^2 give, by
  // Cauchy-Schwarz, |m| / sqrt(v) <= (1 - b1) / sqrt((1 - b2) (1 - b1^2 / b2)) (7.27 for 0.9 and
  // 0.999; Kingma & Ba's 3.16 is the case of one nonzero gradient). The frozen stage holds each
  // step within it: 1-bit gives every element of a column the column's level, so an element
  // whose gradient was zero through the warm-up (a ReLU unit that never fired, a token never
  // seen) gets a momentum of that level over a variance of 0, a step of level / eps that Adam
  // could never take. Unclamped, the default job's MLP went to NaN within 40 steps. Infinity
  // when beta1^2 >= beta2 (no bound).
  static float adam_step_bound(float beta1, float beta2);

 private:
  Backend* backend_;
  float beta1_, beta2_, eps_, weight_decay_;
  int64_t freeze_step_ = 0;
  DeviceBuffer<float> m_, v_;
};

}  // namespace loom::optim
