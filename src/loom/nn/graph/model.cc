#include "loom/nn/graph/model.h"

#include <algorithm>
#include <map>

#include "loom/core/error.h"
#include "loom/core/trace.h"

namespace loom::nn {

Model::Model(Backend& backend, Shape input_shape, int num_classes,
             std::vector<std::unique_ptr<Layer>> layers)
    : Model(backend, std::move(input_shape), num_classes, chain_nodes(std::move(layers))) {}

Model::Model(Backend& backend, Shape input_shape, int num_classes, std::vector<Node> nodes)
    : backend_(&backend), input_shape_(std::move(input_shape)), num_classes_(num_classes) {
  build(std::move(nodes), true);
}

Model::Model(Backend& backend, Shape input_shape, int num_classes, std::vector<Node> nodes,
             StructureOnly)
    : backend_(&backend), input_shape_(std::move(input_shape)), num_classes_(num_classes) {
  build(std::move(nodes), false);
}

void Model::build(std::vector<Node> nodes, bool with_buffers) {
  Backend& backend = *backend_;
  LOOM_CHECK(!nodes.empty());
  const std::string source = nodes.back().source;
  int64_t offset = 0, state_offset = 0;
  std::vector<int64_t> state_at;
  std::vector<std::vector<float>> init_state;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& node = nodes[i];
    std::vector<Shape> in;
    for (int j : node.inputs) {
      LOOM_CHECK(j == kModelInput || (j >= 0 && size_t(j) < i), "node inputs out of order");
      in.push_back(j == kModelInput ? input_shape_ : out_shapes_[size_t(j)]);
    }
    try {
      out_shapes_.push_back(node.layer->build_inputs(in));
    } catch (const ConfigError& e) {
      throw ConfigError(
          fmt::format("layer '{}' ({}): {}", node.name, node.layer->describe(), e.what()));
    }
    const int64_t n = node.layer->num_params();
    const auto check_size = [&](const std::vector<float>& given, int64_t has, const char* what) {
      if (!given.empty() && int64_t(given.size()) != has)
        throw ConfigError(fmt::format("layer '{}' ({}): {} initial {} given, the layer has {}",
                                      node.name, node.layer->describe(), given.size(), what, has));
    };
    check_size(node.init_params, n, "parameters");
    check_size(node.init_state, node.layer->num_state(), "state values");
    init_params_.push_back(std::move(node.init_params));
    init_state.push_back(std::move(node.init_state));
    range_of_layer_.push_back(n > 0 ? int(ranges_.size()) : -1);
    if (n > 0) ranges_.push_back({int(i), offset, n});
    offset += n;
    state_at.push_back(state_offset);
    state_offset += node.layer->num_state();
    names_.push_back(node.name);
    inputs_.push_back(node.inputs);
    layers_.push_back(std::move(node.layer));
  }
  const Shape& out = out_shapes_.back();
  if (out.empty() || out.back() != num_classes_)
    throw ConfigError(fmt::format(
        "{}model output {} (layer '{}') does not end in the {} classes "
        "of the data",
        source.empty() ? "" : source + ": ", shape_text(out), names_.back(), num_classes_));
  output_positions_ = numel(out) / num_classes_;
  num_params_ = offset;
  if (with_buffers) {
    params_ = DeviceBuffer<float>(backend, offset);
    grads_ = DeviceBuffer<float>(backend, offset);
    for (const auto& r : ranges_)
      layers_[size_t(r.layer)]->bind(params_.data() + r.offset, grads_.data() + r.offset);
  }
  state_ = DeviceBuffer<float>(backend, state_offset);
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i]->num_state() == 0) continue;
    layers_[i]->bind_state(state_.data() + state_at[i]);
    layers_[i]->init_state(backend);
    if (!init_state[i].empty())
      backend.copy_to_device(state_.data() + state_at[i], init_state[i].data(),
                             init_state[i].size() * sizeof(float));
  }
  activations_.resize(layers_.size());
  plan_in_place();
  plan_gradients();
}

bool Model::reduces_across_replicas() const {
  for (const auto& l : layers_)
    if (l->reduces_across_replicas()) return true;
  return false;
}

int Model::find_layer(const std::string& name) const {
  for (size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == name) return int(i);
  return -1;
}

void Model::plan_in_place() {
  const size_t n = layers_.size();
  std::vector<int> readers(n, 0);
  for (const auto& in : inputs_)
    for (int j : in)
      if (j >= 0) ++readers[size_t(j)];
  buffer_of_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    buffer_of_[i] = int(i);
    if (!layers_[i]->runs_in_place() || inputs_[i].empty()) continue;
    const int j = inputs_[i][0];  // an in-place layer of several inputs writes over the first
    if (j >= 0 && readers[size_t(j)] == 1 && !layers_[size_t(j)]->backward_reads_output() &&
        numel(out_shapes_[size_t(j)]) == numel(out_shapes_[i]))
      buffer_of_[i] = buffer_of_[size_t(j)];
  }
}

void Model::plan_gradients() {
  const int n = int(layers_.size());
  runs_backward_.assign(size_t(n), false);
  for (int i = 0; i < n; ++i) {
    bool runs = layers_[size_t(i)]->num_params() > 0;
    for (int j : inputs_[size_t(i)]) runs = runs || (j >= 0 && runs_backward_[size_t(j)]);
    runs_backward_[size_t(i)] = runs;
  }
  // Walk backward in the order it runs, giving each layer's output gradient a slot from the
  // first reader's backward to the layer's own, and reusing freed slots (best fit).
  grad_slot_.assign(size_t(n), -1);
  slot_floats_.clear();
  std::vector<int> free_slots;
  auto take = [&](int64_t need) {
    // The smallest free slot that holds `need`, else the largest free one (grown), else a new one.
    int best = -1;
    bool best_fits = false;
    for (int s : free_slots) {
      const bool fits = slot_floats_[size_t(s)] >= need;
      if (best < 0 ||
          (fits && (!best_fits || slot_floats_[size_t(s)] < slot_floats_[size_t(best)])) ||
          (!fits && !best_fits && slot_floats_[size_t(s)] > slot_floats_[size_t(best)])) {
        best = s;
        best_fits = fits;
      }
    }
    if (best < 0) {
      slot_floats_.push_back(need);
      return int(slot_floats_.size()) - 1;
    }
    free_slots.erase(std::find(free_slots.begin(), free_slots.end(), best));
    slot_floats_[size_t(best)] = std::max(slot_floats_[size_t(best)], need);
    return best;
  };
  grad_slot_[size_t(n - 1)] = take(numel(out_shapes_.back()));  // the loss writes it
  std::vector<bool> written(static_cast<size_t>(n), false);
  sum_spare_floats_ = 0;
  for (int i = n - 1; i >= 0; --i) {
    if (!runs_backward_[size_t(i)]) continue;
    int64_t spare = 0;
    for (int j : inputs_[size_t(i)]) {
      if (j < 0 || !runs_backward_[size_t(j)]) continue;
      if (grad_slot_[size_t(j)] < 0) grad_slot_[size_t(j)] = take(numel(out_shapes_[size_t(j)]));
      if (written[size_t(j)]) spare += numel(out_shapes_[size_t(j)]);
      written[size_t(j)] = true;
    }
    sum_spare_floats_ = std::max(sum_spare_floats_, spare);
    // The output's slot holds the loss gradient, which a second backward() of the same
    // forward reads again: it is never reused.
    if (i != n - 1) free_slots.push_back(grad_slot_[size_t(i)]);
  }
  slots_.resize(slot_floats_.size());
}

int64_t Model::flops_per_sample() const {
  int64_t f = 0;
  for (const auto& l : layers_) f += l->flops_per_sample();
  return f;
}

int64_t Model::activation_floats_per_sample() const {
  int64_t n = 0;
  for (size_t i = 0; i < layers_.size(); ++i)
    if (buffer_of_[i] == int(i)) n += numel(out_shapes_[i]);
  for (const auto& l : layers_) n += l->saved_floats_per_sample();
  return n;
}

std::string Model::summary() const {
  std::string s = fmt::format("  {:<16} {:<40} {:<18} {:<14} {:>9} {:>9}\n", "layer", "type",
                              "input", "output", "params", "MFLOP");
  for (size_t i = 0; i < layers_.size(); ++i) {
    std::string in;
    for (int j : inputs_[i]) in += (in.empty() ? "" : ",") + (j < 0 ? "input" : names_[size_t(j)]);
    s += fmt::format("  {:<16} {:<40} {:<18} {:<14} {:>9} {:>9.3f}\n", names_[i],
                     layers_[i]->describe(), in, shape_text(out_shapes_[i]),
                     layers_[i]->num_params(), layers_[i]->flops_per_sample() * 1e-6);
  }
  s += fmt::format("  input {}, total parameters {} ({:.2f} MB), forward {:.2f} MFLOP per sample",
                   shape_text(input_shape_), num_params(), num_params() * 4e-6,
                   flops_per_sample() * 1e-6);
  return s;
}

void Model::init_params(uint64_t seed) {
  for (const auto& r : ranges_) {
    static const std::vector<float> none;
    const std::vector<float>& given =
        size_t(r.layer) < init_params_.size() ? init_params_[size_t(r.layer)] : none;
    if (!given.empty()) {
      backend_->copy_to_device(params_.data() + r.offset, given.data(),
                               given.size() * sizeof(float));
      continue;
    }
    Rng rng(seed, 0, RngPurpose::kInit, uint64_t(r.layer));
    layers_[size_t(r.layer)]->init_params(rng, *backend_);
  }
}

void Model::ensure_capacity(int64_t batch) {
  if (batch <= capacity_) return;
  for (size_t i = 0; i < layers_.size(); ++i)
    if (buffer_of_[i] == int(i))
      activations_[i] = DeviceBuffer<float>(*backend_, batch * numel(out_shapes_[i]));
  for (size_t k = 0; k < slots_.size(); ++k)
    slots_[k] = DeviceBuffer<float>(*backend_, batch * slot_floats_[k]);
  if (sum_spare_floats_ > 0) sum_spare_ = DeviceBuffer<float>(*backend_, batch * sum_spare_floats_);
  capacity_ = batch;
}

Context Model::context(const StepInfo& step) const {
  Context ctx;
  ctx.backend = backend_;
  ctx.training = step.training;
  ctx.dropout_key = step.dropout_key;
  ctx.sample_offset = step.sample_offset;
  ctx.reducer = reducer_;
  return ctx;
}

const float* Model::forward(const float* x, int64_t batch, const StepInfo& step) {
  LOOM_CHECK_GT(batch, 0);
  ensure_capacity(batch);
  Context ctx = context(step);
  std::vector<const float*> xs;
  for (size_t i = 0; i < layers_.size(); ++i) {
    ctx.layer_index = int(i);
    xs.clear();
    for (int j : inputs_[i]) xs.push_back(j < 0 ? x : activation(j));
    trace::Span span;  // timeline: one span per layer (trace.h; one branch when off)
    if (trace::enabled())
      span.begin(fmt::format("fwd {} {}", names_[i], layers_[i]->kind()), "forward");
    try {
      layers_[i]->forward_inputs(ctx, xs, activation(int(i)), batch);
    } catch (const InputError& e) {
      // Bad values in the batch (a token id outside an embedding's vocabulary): say where.
      throw InputError(fmt::format("layer '{}': {}", names_[i], e.what()));
    }
  }
  last_input_ = x;
  last_batch_ = batch;
  last_step_ = step;
  return model_output();
}

LossResult Model::loss(const int32_t* labels, float grad_scale) {
  LOOM_CHECK(last_input_ != nullptr, "loss() before forward()");
  LossResult r;
  const int64_t rows = last_batch_ * output_positions_;
  if (has_ignore_index_) {
    r.loss_sum =
        backend_->softmax_xent_ignore(model_output(), labels, rows, num_classes_, grad_scale,
                                      slots_[size_t(grad_slot_.back())].data(), &r.correct,
                                      label_smoothing_, ignore_index_, &r.counted);
    return r;
  }
  r.loss_sum = backend_->softmax_xent(model_output(), labels, rows, num_classes_, grad_scale,
                                      slots_[size_t(grad_slot_.back())].data(), &r.correct,
                                      label_smoothing_);
  r.counted = rows;
  return r;
}

LossResult Model::loss_mean_over_counted(const int32_t* labels, float grad_scale) {
  LossResult r = loss(labels, grad_scale);
  const float per = r.counted > 0 ? 1.0f / float(r.counted) : 0.0f;
  backend_->scale(last_batch_ * output_positions_ * num_classes_, per,
                  slots_[size_t(grad_slot_.back())].data());
  return r;
}

const char* loss_kind_name(LossKind k) {
  return k == LossKind::kMse ? "mse" : "cross_entropy";
}

LossResult Model::loss(const int32_t* labels, const float* targets, float grad_scale) {
  if (loss_kind_ == LossKind::kMse) {
    LOOM_CHECK(targets != nullptr, "the mse loss needs float targets");
    return mse_loss(targets, grad_scale);
  }
  LOOM_CHECK(labels != nullptr, "the cross-entropy loss needs labels");
  return loss(labels, grad_scale);
}

LossResult Model::mse_loss(const float* targets, float grad_scale) {
  LOOM_CHECK(last_input_ != nullptr, "mse_loss() before forward()");
  LossResult r;
  r.loss_sum = backend_->mse(model_output(), targets, last_batch_ * output_positions_, num_classes_,
                             grad_scale, slots_[size_t(grad_slot_.back())].data());
  return r;
}

void Model::backward(const std::function<void(const ParamRange&)>& on_ready) {
  LOOM_CHECK(last_input_ != nullptr, "backward() before forward()");
  Context ctx = context(last_step_);
  const int n = int(layers_.size());
  std::vector<bool> written(static_cast<size_t>(n), false);
  std::vector<const float*> xs;
  std::vector<float*> dxs;
  std::vector<std::pair<float*, int>> sums;  // spare piece -> layer whose gradient it adds to
  for (int i = n - 1; i >= 0; --i) {
    if (!runs_backward_[size_t(i)]) continue;
    xs.clear();
    dxs.clear();
    sums.clear();
    float* spare = sum_spare_.data();
    for (int j : inputs_[size_t(i)]) {
      xs.push_back(j < 0 ? last_input_ : activation(j));
      if (j < 0 || !runs_backward_[size_t(j)]) {
        dxs.push_back(nullptr);
      } else if (!written[size_t(j)]) {
        dxs.push_back(slots_[size_t(grad_slot_[size_t(j)])].data());
        written[size_t(j)] = true;
      } else {
        dxs.push_back(spare);
        sums.emplace_back(spare, j);
        spare += last_batch_ * numel(out_shapes_[size_t(j)]);
      }
    }
    ctx.layer_index = i;
    trace::Span span;
    if (trace::enabled())
      span.begin(fmt::format("bwd {} {}", names_[size_t(i)], layers_[size_t(i)]->kind()),
                 "backward");
    layers_[size_t(i)]->backward_inputs(
        ctx, xs, activation(i), slots_[size_t(grad_slot_[size_t(i)])].data(), dxs, last_batch_);
    for (const auto& [piece, j] : sums)
      backend_->axpy(last_batch_ * numel(out_shapes_[size_t(j)]), 1.0f, piece,
                     slots_[size_t(grad_slot_[size_t(j)])].data());
    span.end();  // before on_ready, which hands the bucket to the comm thread
    if (on_ready && range_of_layer_[size_t(i)] >= 0)
      on_ready(ranges_[size_t(range_of_layer_[size_t(i)])]);
  }
}

}  // namespace loom::nn
