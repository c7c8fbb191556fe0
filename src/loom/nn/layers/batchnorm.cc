#include "loom/nn/layers/batchnorm.h"

#include <cmath>

#include "loom/core/error.h"

namespace loom::nn {

BatchNorm::BatchNorm(int64_t channels, float eps, float momentum, bool sync)
    : channels_(channels), eps_(eps), momentum_(momentum), sync_(sync) {
  if (channels_ < 1 || channels_ > (int64_t(1) << 24))
    throw ConfigError(fmt::format("{}: channels out of range [1, 2^24]", describe()));
  if (!(eps_ > 0.0f) || !std::isfinite(eps_))
    throw ConfigError(fmt::format("{}: eps must be positive", describe()));
  if (!(momentum_ >= 0.0f && momentum_ <= 1.0f))
    throw ConfigError(fmt::format("{}: momentum must be in [0, 1]", describe()));
}

std::string BatchNorm::kind() const {
  if (rank_ == 0) return "BatchNorm";
  return rank_ == 3 ? "BatchNorm2d" : "BatchNorm1d";
}

std::string BatchNorm::describe() const {
  return fmt::format("{}({}, eps={}, momentum={}{})", kind(), channels_, eps_, momentum_,
                     sync_ ? ", sync" : "");
}

Shape BatchNorm::build(const Shape& input) {
  if (input.empty() || input.size() > 3 || input[0] != channels_)
    throw ConfigError(fmt::format("{}: input {} is not [{}], [{}, L] or [{}, H, W]", describe(),
                                  shape_text(input), channels_, channels_, channels_));
  rank_ = int(input.size());
  plane_ = numel(input) / channels_;
  return input;
}

void BatchNorm::bind(float* params, float* grads) {
  gamma_ = params;
  beta_ = params + channels_;
  dgamma_ = grads;
  dbeta_ = grads + channels_;
}

void BatchNorm::init_params(Rng& rng, Backend& backend) {
  backend.fill(gamma_, channels_, 1.0f);
  backend.fill(beta_, channels_, 0.0f);
}

void BatchNorm::bind_state(float* state) {
  running_mean_ = state;
  running_var_ = state + channels_;
}

void BatchNorm::init_state(Backend& backend) {
  backend.fill(running_mean_, channels_, 0.0f);
  backend.fill(running_var_, channels_, 1.0f);
}

// Two passes, each summed over the replicas when syncing: the mean, then the sum of squared
// deviations from it (accumulated in double by the backend), so a large mean costs no precision
// in the variance.
void BatchNorm::train_forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  Backend& be = *ctx.backend;
  const int64_t c = channels_;
  if (mean_.size() < c) {
    mean_ = DeviceBuffer<float>(be, c);
    var_ = DeviceBuffer<float>(be, c);
    scratch_ = DeviceBuffer<float>(be, c + 1);
  }
  float* sums = scratch_.data();
  if (!syncing(ctx)) {
    // Every pass in one call (the backend may fuse them); the same arithmetic as below.
    count_ = double(float(batch * plane_));  // as the synced path's count travels, in float
    check_count();
    be.batchnorm_forward_training(x, batch, c, plane_, float(1.0 / count_), eps_, gamma_, beta_,
                                  mean_.data(), var_.data(), sums, y);
    update_running(be, sums);
    return;
  }
  be.channel_moments(x, batch, c, plane_, nullptr, sums, nullptr);
  // The count travels with the sums (exact in float up to 2^24 values per channel), so
  // replicas with different batch sizes (a last short batch) still agree.
  be.fill(sums + c, 1, float(batch * plane_));
  ctx.reducer->sum(sums, c + 1);
  float count = 0;
  be.copy_to_host(&count, sums + c, sizeof count);
  count_ = count;
  check_count();
  be.copy(mean_.data(), sums, size_t(c) * sizeof(float));
  be.scale(c, float(1.0 / count_), mean_.data());
  be.channel_moments(x, batch, c, plane_, mean_.data(), nullptr, sums);
  ctx.reducer->sum(sums, c);
  be.copy(var_.data(), sums, size_t(c) * sizeof(float));
  be.scale(c, float(1.0 / count_), var_.data());
  update_running(be, sums);
  be.batchnorm_forward(x, batch, c, plane_, mean_.data(), var_.data(), eps_, gamma_, beta_, y);
}

void BatchNorm::check_count() const {
  if (count_ < 2)
    throw InputError(fmt::format("{}: training needs more than one value per channel, got {}",
                                 describe(), count_));
}

// running = (1 - m) running + m batch; the variance unbiased, sumsq / (count - 1).
void BatchNorm::update_running(Backend& be, const float* sumsq) {
  const int64_t c = channels_;
  be.scale(c, 1.0f - momentum_, running_mean_);
  be.axpy(c, momentum_, mean_.data(), running_mean_);
  be.scale(c, 1.0f - momentum_, running_var_);
  be.axpy(c, float(double(momentum_) / (count_ - 1)), sumsq, running_var_);
}

void BatchNorm::forward(const Context& ctx, const float* x, float* y, int64_t batch) {
  if (ctx.training) {
    train_forward(ctx, x, y, batch);
  } else {
    ctx.backend->batchnorm_forward(x, batch, channels_, plane_, running_mean_, running_var_, eps_,
                                   gamma_, beta_, y);
  }
}

void BatchNorm::backward(const Context& ctx, const float* x, const float* y, const float* dy,
                         float* dx, int64_t batch) {
  Backend& be = *ctx.backend;
  const int64_t c = channels_;
  const float* mean = ctx.training ? mean_.data() : running_mean_;
  const float* var = ctx.training ? var_.data() : running_var_;
  // Over this replica's batch, the two sums are the gradients of beta and gamma.
  if (!dx || !ctx.training) {
    be.batchnorm_backward_reduce(x, dy, batch, c, plane_, mean, var, eps_, dbeta_, dgamma_);
    // fixed statistics: dx = gamma istd dy
    if (dx)
      be.batchnorm_backward_data(x, dy, batch, c, plane_, mean, var, eps_, gamma_, nullptr, nullptr,
                                 1.0, dx);
    return;
  }
  if (!syncing(ctx)) {
    be.batchnorm_backward(x, dy, batch, c, plane_, mean, var, eps_, gamma_, count_, dbeta_, dgamma_,
                          dx);
    return;
  }
  be.batchnorm_backward_reduce(x, dy, batch, c, plane_, mean, var, eps_, dbeta_, dgamma_);
  // Every replica reaches here: the model is the same on all, so dx is null on none or all.
  if (scratch_.size() < 2 * c) scratch_ = DeviceBuffer<float>(be, 2 * c);
  be.copy(scratch_.data(), dbeta_, size_t(c) * sizeof(float));
  be.copy(scratch_.data() + c, dgamma_, size_t(c) * sizeof(float));
  ctx.reducer->sum(scratch_.data(), 2 * c);
  be.batchnorm_backward_data(x, dy, batch, c, plane_, mean, var, eps_, gamma_, scratch_.data(),
                             scratch_.data() + c, count_, dx);
}

}  // namespace loom::nn
