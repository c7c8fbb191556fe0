#include "loom/sync/model_parallel/model_parallel_block.h"

#include <algorithm>
#include <cstring>

#include "loom/core/error.h"

namespace loom::sync {

ModelParallelBlock::ModelParallelBlock(std::shared_ptr<ActivationExchange> ex,
                                       std::vector<BlockSublayer> layers, uint64_t init_seed,
                                       bool input_grad, bool input_grad_partial)
    : ex_(std::move(ex)),
      layers_(std::move(layers)),
      seed_(init_seed),
      input_grad_(input_grad),
      input_grad_partial_(input_grad_partial) {
  LOOM_CHECK(!layers_.empty());
}

std::string ModelParallelBlock::describe() const {
  return fmt::format("ModelParallel[{} layers, {} of {}]", layers_.size(), ex_->rank(),
                     ex_->size());
}

std::string ModelParallelBlock::summary() const {
  std::string s;
  for (const auto& l : layers_)
    s += fmt::format("    [{}] {:<44} params {}\n", l.index, l.layer->describe(),
                     l.layer->num_params());
  return s;
}

nn::Shape ModelParallelBlock::build(const nn::Shape& input) {
  in_features_ = nn::numel(input);
  widest_ = in_features_;
  nn::Shape shape = input;
  int64_t offset = 0;
  for (auto& l : layers_) {
    shape = l.layer->build(shape);
    widths_.push_back(nn::numel(shape));
    widest_ = std::max(widest_, widths_.back());
    offsets_.push_back(offset);
    offset += l.layer->num_params();
  }
  out_features_ = nn::numel(shape);
  acts_.resize(layers_.size());
  return shape;
}

int64_t ModelParallelBlock::num_params() const {
  int64_t n = 0;
  for (const auto& l : layers_) n += l.layer->num_params();
  return n;
}

void ModelParallelBlock::bind(float* params, float* grads) {
  for (size_t i = 0; i < layers_.size(); ++i)
    if (layers_[i].layer->num_params() > 0)
      layers_[i].layer->bind(params + offsets_[i], grads + offsets_[i]);
}

void ModelParallelBlock::init_params(Rng& rng, Backend& backend) {
  (void)rng;  // the block's own index is not a single-worker layer's: draw per sublayer
  for (auto& l : layers_) {
    if (l.layer->num_params() == 0) continue;
    Rng sub(seed_, 0, RngPurpose::kInit, uint64_t(l.index));
    l.layer->init_params(sub, backend);
  }
}

int64_t ModelParallelBlock::flops_per_sample() const {
  int64_t f = 0;
  for (const auto& l : layers_) f += l.layer->flops_per_sample();
  return f;
}

void ModelParallelBlock::ensure(int64_t rows) {
  if (rows <= capacity_) return;
  input_.resize(size_t(rows * in_features_));
  for (size_t i = 0; i < layers_.size(); ++i) acts_[i].resize(size_t(rows * widths_[i]));
  grad_a_.resize(size_t(rows * widest_));
  grad_b_.resize(size_t(rows * widest_));
  dy_.resize(size_t(rows * out_features_));
  capacity_ = rows;
}

void ModelParallelBlock::forward(const nn::Context& ctx, const float* x, float* y, int64_t batch) {
  LOOM_CHECK(ctx.backend->device() == Device::kCpu,
             "model-parallel layers exchange host memory: use the cpu backend");
  ex_->exchange_layout(batch, ctx.sample_offset);
  const RowLayout& L = ex_->layout();
  const int64_t rows = L.total;
  ensure(rows);
  ex_->gather_rows(x, in_features_, input_.data(), /*lossy=*/true);
  nn::Context sub = ctx;
  const float* in = input_.data();
  for (size_t i = 0; i < layers_.size(); ++i) {
    sub.layer_index = layers_[i].index;
    layers_[i].layer->forward(sub, in, acts_[i].data(), rows);
    in = acts_[i].data();
  }
  std::memcpy(y, in + L.starts[size_t(ex_->rank())] * out_features_,
              size_t(batch * out_features_) * sizeof(float));
}

void ModelParallelBlock::backward(const nn::Context& ctx, const float* x, const float* y,
                                  const float* dy, float* dx, int64_t batch) {
  (void)x;
  (void)y;
  const RowLayout& L = ex_->layout();
  const int64_t rows = L.total;
  LOOM_CHECK_EQ(L.counts[size_t(ex_->rank())], batch);
  ex_->gather_rows(dy, out_features_, dy_.data(), /*lossy=*/false);
  nn::Context sub = ctx;
  const float* d = dy_.data();
  float* spare[2] = {grad_a_.data(), grad_b_.data()};
  int next = 0;
  for (int i = int(layers_.size()) - 1; i >= 0; --i) {
    const float* in = i == 0 ? input_.data() : acts_[size_t(i - 1)].data();
    float* dxi = (i == 0 && !input_grad_) ? nullptr : spare[next];
    sub.layer_index = layers_[size_t(i)].index;
    layers_[size_t(i)].layer->backward(sub, in, acts_[size_t(i)].data(), d, dxi, rows);
    d = dxi;
    next ^= 1;
  }
  if (!dx) return;
  if (!input_grad_) {  // nothing before the block learns: its input gradient is not needed
    std::memset(dx, 0, size_t(batch * in_features_) * sizeof(float));
    return;
  }
  if (input_grad_partial_) {
    ex_->reduce_scatter_rows(d, in_features_, dx);
  } else {
    std::memcpy(dx, d + L.starts[size_t(ex_->rank())] * in_features_,
                size_t(batch * in_features_) * sizeof(float));
  }
}

}  // namespace loom::sync
