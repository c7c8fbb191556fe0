#include "loom/nn/model.h"

#include <algorithm>

#include "loom/core/error.h"
#include "loom/core/trace.h"

namespace loom::nn {

Model::Model(Backend& backend, Shape input_shape, int num_classes,
             std::vector<std::unique_ptr<Layer>> layers)
    : backend_(&backend),
      input_shape_(std::move(input_shape)),
      num_classes_(num_classes),
      layers_(std::move(layers)) {
  LOOM_CHECK(!layers_.empty());
  Shape shape = input_shape_;
  int64_t offset = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    shape = layers_[i]->build(shape);
    out_shapes_.push_back(shape);
    const int64_t n = layers_[i]->num_params();
    range_of_layer_.push_back(n > 0 ? int(ranges_.size()) : -1);
    if (n > 0) ranges_.push_back({int(i), offset, n});
    offset += n;
  }
  if (numel(shape) != num_classes_)
    throw ConfigError(fmt::format("model output {} does not match the {} classes of the data",
                                  shape_text(shape), num_classes_));
  params_ = DeviceBuffer<float>(backend, offset);
  grads_ = DeviceBuffer<float>(backend, offset);
  for (const auto& r : ranges_)
    layers_[r.layer]->bind(params_.data() + r.offset, grads_.data() + r.offset);
  activations_.resize(layers_.size());
}

int64_t Model::flops_per_sample() const {
  int64_t f = 0;
  for (const auto& l : layers_) f += l->flops_per_sample();
  return f;
}

int64_t Model::activation_floats_per_sample() const {
  int64_t n = 0;
  for (const auto& s : out_shapes_) n += numel(s);
  return n;
}

std::string Model::summary() const {
  std::string s;
  Shape in = input_shape_;
  for (size_t i = 0; i < layers_.size(); ++i) {
    s += fmt::format("  {:<36} {:>14} -> {:<14} params {}\n", layers_[i]->describe(),
                     shape_text(in), shape_text(out_shapes_[i]), layers_[i]->num_params());
    in = out_shapes_[i];
  }
  s += fmt::format("  total parameters {} ({:.2f} MB), forward {:.2f} MFLOP per sample",
                   num_params(), num_params() * 4e-6, flops_per_sample() * 1e-6);
  return s;
}

void Model::init_params(uint64_t seed) {
  for (const auto& r : ranges_) {
    Rng rng(seed, 0, RngPurpose::kInit, uint64_t(r.layer));
    layers_[r.layer]->init_params(rng, *backend_);
  }
}

void Model::ensure_capacity(int64_t batch) {
  if (batch <= capacity_) return;
  int64_t widest = numel(input_shape_);
  for (size_t i = 0; i < layers_.size(); ++i) {
    activations_[i] = DeviceBuffer<float>(*backend_, batch * numel(out_shapes_[i]));
    widest = std::max(widest, numel(out_shapes_[i]));
  }
  grad_a_ = DeviceBuffer<float>(*backend_, batch * widest);
  grad_b_ = DeviceBuffer<float>(*backend_, batch * widest);
  dlogits_ = DeviceBuffer<float>(*backend_, batch * num_classes_);
  capacity_ = batch;
}

const float* Model::forward(const float* x, int64_t batch, const StepInfo& step) {
  LOOM_CHECK_GT(batch, 0);
  ensure_capacity(batch);
  Context ctx{backend_, step.training, step.dropout_key, step.sample_offset, 0};
  const float* in = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    ctx.layer_index = int(i);
    trace::Span span;  // timeline: one span per layer (trace.h; one branch when off)
    if (trace::enabled()) span.begin(fmt::format("fwd {} {}", i, layers_[i]->kind()), "forward");
    layers_[i]->forward(ctx, in, activations_[i].data(), batch);
    in = activations_[i].data();
  }
  last_input_ = x;
  last_batch_ = batch;
  last_step_ = step;
  return in;
}

LossResult Model::loss(const int32_t* labels, float grad_scale) {
  LOOM_CHECK(last_input_ != nullptr, "loss() before forward()");
  LossResult r;
  r.loss_sum = backend_->softmax_xent(activations_.back().data(), labels, last_batch_, num_classes_,
                                      grad_scale, dlogits_.data(), &r.correct);
  return r;
}

void Model::backward(const std::function<void(const ParamRange&)>& on_ready) {
  LOOM_CHECK(last_input_ != nullptr, "backward() before forward()");
  Context ctx{backend_, last_step_.training, last_step_.dropout_key, last_step_.sample_offset, 0};
  const float* dy = dlogits_.data();
  float* spare[2] = {grad_a_.data(), grad_b_.data()};
  int next = 0;
  // Below the first layer with parameters nothing needs a gradient: the input takes none, so
  // that layer computes no input gradient (for the MLP, whose first layer is a Flatten, this
  // spares a [batch, 784] x [784, 1024] product, 17% of the step's FLOPs) and the layers under
  // it are not run backward at all.
  int first_trained = 0;
  while (first_trained < int(layers_.size()) && layers_[first_trained]->num_params() == 0)
    ++first_trained;
  for (int i = int(layers_.size()) - 1; i >= first_trained; --i) {
    const float* x = i == 0 ? last_input_ : activations_[i - 1].data();
    float* dx = i == first_trained ? nullptr : spare[next];
    ctx.layer_index = i;
    trace::Span span;
    if (trace::enabled()) span.begin(fmt::format("bwd {} {}", i, layers_[i]->kind()), "backward");
    layers_[i]->backward(ctx, x, activations_[i].data(), dy, dx, last_batch_);
    span.end();  // before on_ready, which hands the bucket to the comm thread
    if (on_ready && range_of_layer_[i] >= 0) on_ready(ranges_[range_of_layer_[i]]);
    dy = dx;
    next ^= 1;
  }
}

}  // namespace loom::nn
