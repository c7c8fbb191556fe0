// Optimizers on flat spans. State (momentum, Adam moments) is one flat buffer the size of the
// model, sliced by offset, so a parameter-server shard can update just its key range and a
// checkpoint can save the state as it lies.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loom/core/config_value.h"
#include "loom/tensor/backend.h"
#include "loom/tensor/buffer.h"

namespace loom::optim {

struct StateBuffer {
  std::string name;
  float* data;
  int64_t size;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string describe() const = 0;
  // Starts a new step (Adam counts steps for bias correction). Call once per step.
  virtual void advance() { ++steps_; }
  // Updates params[offset, offset + n) from grads of the same range (both already offset).
  virtual void update(float* params, const float* grads, int64_t offset, int64_t n, float lr) = 0;
  // advance() then update() over everything.
  void step(float* params, const float* grads, int64_t n, float lr) {
    advance();
    update(params, grads, 0, n, lr);
  }
  // Zeroes momentum/moments (block momentum resets local momentum after each block).
  virtual void reset_state() = 0;
  virtual std::vector<StateBuffer> state() = 0;
  int64_t steps() const { return steps_; }
  void set_steps(int64_t s) { steps_ = s; }

 protected:
  int64_t steps_ = 0;
};

class Sgd final : public Optimizer {
 public:
  Sgd(Backend& backend, int64_t num_params, float momentum, float weight_decay, bool nesterov);
  std::string describe() const override;
  void update(float* params, const float* grads, int64_t offset, int64_t n, float lr) override;
  void reset_state() override;
  std::vector<StateBuffer> state() override;

 private:
  Backend* backend_;
  float momentum_, weight_decay_;
  bool nesterov_;
  DeviceBuffer<float> velocity_;
};

class Adam final : public Optimizer {
 public:
  Adam(Backend& backend, int64_t num_params, float beta1, float beta2, float eps,
       float weight_decay, bool decoupled);
  std::string describe() const override;
  void update(float* params, const float* grads, int64_t offset, int64_t n, float lr) override;
  void reset_state() override;
  std::vector<StateBuffer> state() override;

 private:
  Backend* backend_;
  float beta1_, beta2_, eps_, weight_decay_;
  bool decoupled_;
  DeviceBuffer<float> m_, v_;
};

// Keys: optim.name ("sgd" | "adam" | "onebit_adam", optim/onebit_adam.h), optim.lr, optim.momentum,
// optim.nesterov, optim.weight_decay, optim.beta1, optim.beta2, optim.eps, optim.decoupled,
// optim.clip_norm.
std::vector<ConfigKeySpec> optimizer_config_keys();

// Gradient clipping by global norm: the strategy that owns the update scales the combined
// gradient g by clip_factor(|g|^2, c) = min(1, c / |g|) before the optimizer sees it
// (sync/allreduce/allreduce_strategy.h says where the norm is taken).
// Sum of squares of host floats, accumulated in double.
double squared_norm(const float* x, int64_t n);
float clip_factor(double squared_norm, float clip_norm);

// An optimizer's settings (the optim.* keys above but optim.lr, which the schedule takes, and
// optim.clip_norm, which the strategy applies), read by the run plan (plan/optim_reader.h).
struct OptimizerOptions {
  std::string name = "sgd";  // "sgd" | "adam" | "onebit_adam"
  float weight_decay = 0.0f;
  float momentum = 0.9f;  // SGD
  bool nesterov = false;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // Adam and 1-bit Adam
  bool decoupled = false;
};
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& o, Backend& backend,
                                          int64_t num_params);

}  // namespace loom::optim
