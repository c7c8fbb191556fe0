#include "loom/sync/bmuf_strategy.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "loom/core/error.h"
#include "loom/core/timer.h"
#include "loom/sync/allreduce/allreduce_strategy.h"
#include "loom/sync/codec_state_io.h"

namespace loom::sync {

BmufStrategy::BmufStrategy(comm::Communicator& comm, nn::Model& model, optim::Optimizer& optimizer,
                           BmufOptions options)
    : comm_(comm),
      model_(model),
      optimizer_(optimizer),
      options_(std::move(options)),
      eta_(options_.eta >= 0 ? options_.eta : 1.0 - 1.0 / double(comm.size())),
      chunks_(plan_buckets(model.param_ranges(), options_.chunk_bytes)) {
  LOOM_CHECK(model.backend().device() == Device::kCpu, "block momentum needs host memory");
  LOOM_CHECK(options_.tau >= 1, "bmuf.tau {} < 1", options_.tau);
  LOOM_CHECK(eta_ >= 0 && eta_ < 1, "block momentum {} outside [0, 1)", eta_);
  const size_t n = size_t(model.num_params());
  prev_.assign(n, 0.0f);
  velocity_.assign(n, 0.0f);
  delta_.assign(n, 0.0f);
  const int world = comm_.size();
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const size_t count = size_t(chunks_[c].count);
    if (compressed()) {
      codec_states_.push_back(sync::make_compressed_allreduce_state(
          *options_.codec, count, world, comm_.rank(), fmt::format("block delta chunk {}", c),
          bucket_matrices(model, chunks_[c])));
      bytes_per_block_ += int64_t(codec_states_.back().wire_bytes);
    } else if (world > 1) {
      bytes_per_block_ += int64_t(sync::fp32_allreduce_wire_bytes(count, world));
    }
  }
}

std::string BmufStrategy::describe() const {
  const int64_t fp32 =
      int64_t(sync::fp32_allreduce_wire_bytes(size_t(model_.num_params()), comm_.size()));
  const int64_t tau = options_.tau;
  return fmt::format(
      "bmuf over {} ({} worker{}): block of tau = {} local step{}, block momentum eta = {:.4g}, "
      "block lr zeta = {:.4g}, {}, local momentum {} after each block; per block {} "
      "chunks, {}",
      comm_.name(), comm_.size(), comm_.size() == 1 ? "" : "s", tau, tau == 1 ? "" : "s", eta_,
      options_.zeta, options_.nesterov ? "Nesterov" : "classic momentum",
      options_.reset_momentum ? "reset" : "kept", chunks_.size(),
      describe_wire(options_.codec.get(), (bytes_per_block_ + tau - 1) / tau,
                    (fp32 + tau - 1) / tau));
}

void BmufStrategy::start() {
  std::span<float> params(model_.params(), size_t(model_.num_params()));
  comm_.broadcast(params, 0);
  std::copy(params.begin(), params.end(), prev_.begin());
  std::fill(velocity_.begin(), velocity_.end(), 0.0f);
  steps_in_block_ = 0;
}

float BmufStrategy::grad_scale(int64_t local_batch) const {
  return 1.0f / float(local_batch);  // local SGD on this worker's own mean gradient
}

void BmufStrategy::begin_step(int64_t step, float lr) {
  (void)step;
  lr_ = lr;
  optimizer_.advance();
}

void BmufStrategy::on_gradients_ready(const nn::ParamRange& range) {
  // Backward has finished with this layer (its input gradient included), so its parameters
  // can take the local step now.
  optimizer_.update(model_.params() + range.offset, model_.grads() + range.offset, range.offset,
                    range.count, lr_);
}

void BmufStrategy::end_step() {
  if (++steps_in_block_ == options_.tau) sync_block();
}

void BmufStrategy::finish() {
  if (steps_in_block_ > 0) sync_block();
}

void BmufStrategy::save_state(StrategyState& out) const {
  out.floats["bmuf.prev"] = prev_;
  out.floats["bmuf.velocity"] = velocity_;
  std::vector<uint8_t> k(sizeof(int64_t));
  std::memcpy(k.data(), &steps_in_block_, sizeof(int64_t));
  out.bytes["bmuf.steps_in_block"] = std::move(k);
  for (size_t c = 0; c < codec_states_.size(); ++c)
    save_codec_states(codec_states_[c], fmt::format("chunk{}", c), out);
}

void BmufStrategy::restore_state(const StrategyState& in) {
  prev_ = in.need_floats("bmuf.prev", prev_.size());
  velocity_ = in.need_floats("bmuf.velocity", velocity_.size());
  std::memcpy(&steps_in_block_, in.need_bytes("bmuf.steps_in_block", sizeof(int64_t)).data(),
              sizeof(int64_t));
  for (size_t c = 0; c < codec_states_.size(); ++c)
    restore_codec_states(codec_states_[c], fmt::format("chunk{}", c), in);
}

std::string BmufStrategy::restore_resharded(const std::vector<StrategyState>& ranks) {
  const StrategyState& first = ranks.at(0);
  int64_t k = 0;
  std::memcpy(&k, first.need_bytes("bmuf.steps_in_block", sizeof(int64_t)).data(), sizeof(int64_t));
  if (k != 0)
    throw ConfigError(fmt::format(
        "sync = \"bmuf\": the checkpoint was written {} step{} into a block of bmuf.tau = {}, "
        "where each of its {} workers holds a model of its own; it resumes on {} worker{} only. "
        "Checkpoints at block boundaries (train.checkpoint_every a multiple of bmuf.tau) resume "
        "on any world size",
        k, k == 1 ? "" : "s", options_.tau, ranks.size(), ranks.size(),
        ranks.size() == 1 ? "" : "s"));
  prev_ = first.need_floats("bmuf.prev", prev_.size());
  velocity_ = first.need_floats("bmuf.velocity", velocity_.size());
  steps_in_block_ = 0;
  // The codec residuals of the block deltas, summed, to rank 0. They are parts of the sum of
  // the workers' deltas, which is divided by the world size: scaled by new / old world they add
  // the same to the averaged delta G. A world of one runs no codec: dropped.
  const double scale = double(comm_.size()) / double(ranks.size());
  bool any = false;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    std::vector<double> total =
        add_saved_residuals(ranks, fmt::format("chunk{}", c), size_t(chunks_[c].count), {});
    for (double& x : total) {
      x *= scale;
      any = any || x != 0.0;
    }
    if (compressed())
      restore_summed_residuals(codec_states_[c], fmt::format("chunk{}", c), total, first);
  }
  std::string out;
  if (any)
    out = compressed() ? "the codec residuals of the block deltas are summed and handed to rank 0 "
                         "(their sum is kept, not how the ranks shared it)"
                       : "the codec residuals of the block deltas are dropped (a world of one "
                         "runs no codec to send them with)";
  if (!options_.reset_momentum)
    out += fmt::format(
        "{}every worker starts with rank 0's local optimizer state "
        "(bmuf.reset_momentum = false keeps one per worker)",
        out.empty() ? "" : "; ");
  if (options_.eta < 0)
    out += fmt::format("{}block momentum eta = 1 - 1/N is {:.4g} from here on",
                       out.empty() ? "" : "; ", eta_);
  return out;
}

void BmufStrategy::sync_block() {
  Stopwatch watch;
  const size_t n = prev_.size();
  float* w = model_.params();
  const int world = comm_.size();
  // This worker's block delta W_prev - W_i: a descent direction, like a gradient.
  for (size_t i = 0; i < n; ++i) delta_[i] = prev_[i] - w[i];
  // Sum over workers, chunk by chunk (compressed: the same decoded bits on every rank).
  if (world > 1) {
    for (size_t c = 0; c < chunks_.size(); ++c) {
      std::span<float> part(delta_.data() + chunks_[c].offset, size_t(chunks_[c].count));
      if (compressed())
        sync::compressed_allreduce(comm_, *options_.codec, part, codec_states_[c]);
      else
        comm_.allreduce(part);
    }
    stats_.bytes_sent += bytes_per_block_;
    ++stats_.exchanges;
  }
  const float inv_n = 1.0f / float(world);
  const float eta = float(eta_);
  const float gain = float((1.0 - eta_) * options_.zeta);
  const float look_ahead = options_.nesterov ? eta : 0.0f;
  for (size_t i = 0; i < n; ++i) {
    const float g = delta_[i] * inv_n;              // G(t) = W_prev - mean_i W_i(t)
    const float v = eta * velocity_[i] + gain * g;  // V(t) = eta V(t-1) + (1-eta) zeta G(t)
    velocity_[i] = v;
    const float global = prev_[i] - v;           // W(t) = W_prev - V(t)
    const float next = global - look_ahead * v;  // Nesterov: start at W(t) - eta V(t)
    prev_[i] = next;
    w[i] = next;
  }
  if (options_.reset_momentum) optimizer_.reset_state();
  steps_in_block_ = 0;
  const double s = watch.seconds();
  stats_.comm_seconds += s;
  stats_.exposed_seconds += s;  // the block sync does not overlap compute
}

}  // namespace loom::sync
