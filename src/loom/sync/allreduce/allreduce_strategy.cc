#include "loom/sync/allreduce/allreduce_strategy.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "loom/comm/algorithms.h"
#include "loom/compress/device_codec_registry.h"
#include "loom/core/error.h"
#include "loom/core/timer.h"
#include "loom/core/trace.h"
#include "loom/optim/optimizer.h"
#include "loom/sync/codec_state_io.h"

namespace loom::sync {

std::string describe_wire(const compress::Codec* codec, int64_t bytes_per_step,
                          int64_t fp32_bytes_per_step) {
  const std::string what =
      codec == nullptr
          ? std::string("fp32")
          : fmt::format("codec {} (error feedback {}{})", codec->name(),
                        codec->error_feedback() ? "on" : "off",
                        codec->error_feedback()
                            ? fmt::format(", {} residual",
                                          compress::residual_format_name(codec->residual_format()))
                            : "");
  if (fp32_bytes_per_step == 0) return what + ", nothing sent (one worker)";
  return fmt::format(
      "{}, {:.3f} MB/step sent per rank (1/{:.1f} of fp32's {:.3f} MB)", what,
      double(bytes_per_step) / 1e6,
      bytes_per_step > 0 ? double(fp32_bytes_per_step) / double(bytes_per_step) : 0.0,
      double(fp32_bytes_per_step) / 1e6);
}

AllreduceStrategy::AllreduceStrategy(comm::Communicator& comm, nn::Model& model,
                                     optim::Optimizer& optimizer, AllreduceOptions options)
    : comm_(comm),
      model_(model),
      optimizer_(optimizer),
      options_(std::move(options)),
      buckets_(plan_buckets(model.param_ranges(), options_.bucket_bytes)),
      tracker_(model.param_ranges(), buckets_) {
  // Gradients are handed to the transport as they lie: host memory for the host transports,
  // the communicator's own device memory for nccl (which has no codec path yet).
  LOOM_CHECK(model.backend().device() == Device::kCpu || comm.device_memory(),
             "the allreduce strategy over {} needs the model in {} memory", comm.name(),
             comm.device_memory() ? "its device's" : "host");
  const bool on_device = model.backend().device() != Device::kCpu;
  if (on_device && compressed()) {
    device_codec_ = compress::make_device_codec(*options_.codec, model.backend());
    if (!device_codec_)
      throw ConfigError(
          fmt::format("codec {} has no device kernels: gradients in device memory "
                      "take fp16, bf16, int8, onebit or topk",
                      options_.codec->name()));
  }
  if (options_.clip_norm > 0.0f && on_device)
    throw ConfigError(
        "optim.clip_norm takes the norm of gradients in host memory: not available with "
        "gradients in device memory (backend = \"cuda\")");
  if (options_.combine == CombineWhere::kThread && comm_.size() > 1)
    queue_ = std::make_unique<BackgroundQueue>();
  onebit_adam_ = dynamic_cast<optim::OnebitAdam*>(&optimizer);
  if (onebit_adam_) {
    // Its Adam stage is the codec's exact warm-up; a world of one applies the same rule to its
    // own gradient.
    LOOM_CHECK(options_.codec != nullptr, "1-bit Adam needs a codec for its momentum");
    onebit_adam_->set_freeze_step(options_.codec_warmup_steps);
  }
  // A world of one sends nothing: the optimizer's own momentum applies the gradient.
  if (options_.momentum_correction != 0.0f && comm_.size() > 1) {
    if (on_device)
      throw ConfigError(
          "sync.momentum_correction keeps its velocities in host memory: not available with "
          "gradients in device memory (backend = \"cuda\")");
    LOOM_CHECK(options_.codec != nullptr, "momentum correction needs a codec");
    LOOM_CHECK(!options_.momentum_masking ||
                   options_.codec->aggregation() == compress::Aggregation::kGather,
               "momentum masking needs a sparsifying codec (topk)");
    plain_sgd_ = std::make_unique<optim::Sgd>(model.backend(), model.num_params(), 0.0f,
                                              options_.sgd_weight_decay, false);
    for (const Bucket& b : buckets_) local_velocity_.emplace_back(size_t(b.count), 0.0f);
  }
  // comm.algorithm = "two-level" (or "auto" over several machines) decides per bucket, by its
  // size; such a bucket is all-reduced, reduce-scattered and all-gathered in two levels, and its
  // host codec runs two-level where it can.
  const int world = comm_.size();
  for (const Bucket& b : buckets_) {
    // (Device memory: the transport's own collectives, which reduce on the device.)
    const bool two = world > 1 && !comm_.device_memory() &&
                     comm_.allreduce_path(size_t(b.count) * sizeof(float)) ==
                         comm::Communicator::AllreducePath::kTwoLevel;
    bucket_two_level_.push_back(two ? 1 : 0);
    two_level_ = two_level_ || two;
  }
  if (two_level_)
    groups_ = comm::algo::two_level_groups(comm_.machine_of_rank(), world, comm_.rank());
  if (two_level_ && compressed()) {
    if (device_codec_)
      codec_flat_because_ = "device codecs exchange flat";
    else if (!can_two_level(*options_.codec))
      codec_flat_because_ = fmt::format(
          "{} factors whole matrices, which node-shards cut; its "
          "float allreduces run two-level",
          options_.codec->name());
    else if (plain_sgd_ && options_.momentum_masking)
      codec_flat_because_ = "momentum masking reads each worker's own residual";
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const size_t n = size_t(buckets_[b].count);
    const bool small = int64_t(n) < options_.codec_min_elements;
    if (device_codec_) {
      device_states_.push_back(sync::make_device_allreduce_state(
          *device_codec_, model.backend(), n, world, comm_.rank(), fmt::format("bucket {}", b)));
      bytes_per_step_ += small ? int64_t(sync::fp32_allreduce_wire_bytes(n, world))
                               : int64_t(device_states_.back().wire_bytes);
    } else if (compressed() && bucket_two_level_[b] && codec_flat_because_.empty()) {
      codec_states_.emplace_back();
      two_level_states_.push_back(sync::make_two_level_compressed_state(
          *options_.codec, n, comm_.machine_of_rank(), world, comm_.rank(),
          fmt::format("bucket {}", b), options_.aggregation));
      bytes_per_step_ += small ? int64_t(sync::fp32_allreduce_wire_bytes(n, world))
                               : int64_t(two_level_states_.back().wire_bytes());
      if (!small) codec_cross_bytes_ += int64_t(two_level_states_.back().inter_bytes);
    } else if (compressed()) {
      codec_states_.push_back(sync::make_compressed_allreduce_state(
          *options_.codec, n, world, comm_.rank(), fmt::format("bucket {}", b),
          bucket_matrices(model, buckets_[b]), options_.aggregation));
      two_level_states_.emplace_back();
      bytes_per_step_ += small ? int64_t(sync::fp32_allreduce_wire_bytes(n, world))
                               : int64_t(codec_states_.back().wire_bytes);
    } else if (world > 1) {
      bytes_per_step_ += int64_t(sync::fp32_allreduce_wire_bytes(n, world));
    }
  }
}

comm::BlockRange AllreduceStrategy::owned(int b) const {
  const size_t n = size_t(buckets_[size_t(b)].count);
  return bucket_two_level_[size_t(b)] ? comm::algo::two_level_owned(groups_, n)
                                      : comm::block_range(n, comm_.size(), comm_.rank());
}

int64_t AllreduceStrategy::sharded_bytes(int b) const {
  const size_t n = size_t(buckets_[size_t(b)].count);
  if (!bucket_two_level_[size_t(b)]) {
    // Reduce-scatter moves (n-1)/n of the bucket out, allgather the same again.
    return int64_t(2 * (n - owned(b).size()) * sizeof(float));
  }
  // Each ring sends every block but one (algorithms.h): inside the machine the blocks of L,
  // across machines the sub-blocks of M of this rank's block.
  const int L = groups_.per_machine, M = groups_.machines, i = groups_.local, m = groups_.machine;
  const size_t block = comm::block_range(n, L, i).size();
  const size_t floats = 2 * n - comm::block_range(n, L, i).size() -
                        comm::block_range(n, L, (i + 1) % L).size() + 2 * block -
                        comm::block_range(block, M, m).size() -
                        comm::block_range(block, M, (m + 1) % M).size();
  return int64_t(floats * sizeof(float));
}

std::string AllreduceStrategy::describe() const {
  const int64_t fp32 =
      int64_t(sync::fp32_allreduce_wire_bytes(size_t(model_.num_params()), comm_.size()));
  const bool sharded = options_.shard_optimizer && !options_.codec;
  std::string codec_extras;
  if (compressed()) {
    if (options_.aggregation == compress::Aggregation::kGather &&
        options_.codec->aggregation() == compress::Aggregation::kStripes)
      codec_extras += ", encodings gathered";
    if (options_.codec_warmup_steps > 0)
      codec_extras += fmt::format(", exact for the first {} steps", options_.codec_warmup_steps);
    int exact = 0;
    for (const Bucket& b : buckets_) exact += b.count < options_.codec_min_elements ? 1 : 0;
    if (exact > 0)
      codec_extras += fmt::format(", {} bucket{} under {} floats exact", exact,
                                  exact == 1 ? "" : "s", options_.codec_min_elements);
  }
  if (options_.clip_norm > 0.0f)
    codec_extras += fmt::format(", gradient norm clipped to {:g}", options_.clip_norm);
  // Which algorithm carries the buckets where comm.algorithm or the machines choose one.
  std::string algorithm;
  if (two_level_) {
    std::string codec_where;
    if (compressed() && codec_flat_because_.empty())
      codec_where = fmt::format(
          ", codec across machines only ({:.3f} MB/step encoded to other "
          "machines per rank, fp32 inside)",
          double(codec_cross_bytes_) / 1e6);
    else if (compressed())
      codec_where = fmt::format(" for exact buckets, codec buckets flat ({})", codec_flat_because_);
    algorithm = fmt::format(", two-level ({}){}",
                            comm::machine_layout(comm_.machine_of_rank(), comm_.size()).describe(),
                            codec_where);
  } else if (comm_.options().algorithm != comm::AllreduceAlgorithm::kAuto && comm_.size() > 1) {
    algorithm = fmt::format(
        ", comm.algorithm {}{}", comm::allreduce_algorithm_name(comm_.options().algorithm),
        comm_.options().algorithm == comm::AllreduceAlgorithm::kTwoLevel
            ? " (flat: " + comm::machine_layout(comm_.machine_of_rank(), comm_.size()).describe() +
                  ")"
            : "");
  }
  return fmt::format("allreduce over {} ({} worker{}{}), {} bucket{} of <= {} KiB, {}{}{}{}; {}",
                     comm_.name(), comm_.size(), comm_.size() == 1 ? "" : "s", algorithm,
                     buckets_.size(), buckets_.size() == 1 ? "" : "s", options_.bucket_bytes >> 10,
                     options_.combine == CombineWhere::kThread ? "overlapped with backward"
                     : options_.combine == CombineWhere::kInline
                         ? "during backward, on the compute thread"
                         : "after backward",
                     sharded && two_level_      ? ", optimizer sharded (two-level)"
                     : sharded                  ? ", optimizer sharded"
                     : options_.shard_optimizer ? ", optimizer not sharded (codec)"
                                                : "",
                     plain_sgd_ ? options_.momentum_masking
                                      ? ", momentum correction with masking (DGC)"
                                      : ", momentum correction (each worker sends its velocity)"
                                : "",
                     codec_extras, describe_wire(options_.codec.get(), bytes_per_step_, fp32));
}

void AllreduceStrategy::start() {
  comm_.broadcast(std::span<float>(model_.params(), size_t(model_.num_params())), 0);
}

float AllreduceStrategy::grad_scale(int64_t local_batch) const {
  return 1.0f / float(local_batch * comm_.size());
}

void AllreduceStrategy::begin_step(int64_t step, float lr) {
  step_ = step;
  lr_ = lr;
  optimizer_.advance();
  tracker_.reset();
}

void AllreduceStrategy::combine(int b) {
  const Bucket& bucket = buckets_[size_t(b)];
  Stopwatch watch;
  // Timeline (trace.h): the combine and its phases, on the comm thread when overlapped.
  trace::bind_thread(comm_.rank(), trace::kCommTid, "comm");
  trace::Span span, phase;
  if (trace::enabled())
    span.begin(fmt::format("combine bucket {}", b), "comm",
               {{"bucket", b}, {"floats", bucket.count}});
  float* grads = model_.grads() + bucket.offset;
  float* params = model_.params() + bucket.offset;
  const size_t n = size_t(bucket.count);
  const int world = comm_.size();
  const bool clip = options_.clip_norm > 0.0f;  // the update waits for clip_and_update()
  if (clip && world == 1) {
    // Nothing to combine; clip_and_update() updates.
  } else if (clip && sharded()) {
    phase.next("reduce-scatter", "comm");
    if (bucket_two_level_[size_t(b)])
      comm::algo::two_level_reduce_scatter(comm_, comm_.machine_of_rank(), grads, n,
                                           comm::sum_f32());
    else
      comm_.reduce_scatter(std::span<float>(grads, n));
    comm_bytes_ += sharded_bytes(b);  // and the allgather
  } else if (world == 1) {
    phase.next("optimizer", "optim");
    optimizer_.update(params, grads, bucket.offset, bucket.count, lr_);
  } else if (device_codec_ && exact_now(b)) {
    phase.next("allreduce", "comm");
    comm_.allreduce(std::span<float>(grads, n));
    phase.next("optimizer", "optim");
    optimizer_.update(params, grads, bucket.offset, bucket.count, lr_);
    comm_bytes_ += int64_t(sync::fp32_allreduce_wire_bytes(n, world));
  } else if (device_codec_) {
    sync::DeviceAllreduceState& st = device_states_[size_t(b)];
    phase.next("compressed allreduce", "comm");
    sync::device_compressed_allreduce(comm_, *device_codec_, model_.backend(), grads, st);
    phase.next("optimizer", "optim");
    optimizer_.update(params, grads, bucket.offset, bucket.count, lr_);
    comm_bytes_ += int64_t(st.wire_bytes);
  } else if (compressed()) {
    combine_compressed(b);
  } else if (options_.shard_optimizer && !clip && bucket_two_level_[size_t(b)]) {
    // Two levels: the machine's block, then this rank's part of it across machines.
    phase.next("reduce-scatter", "comm");
    const comm::BlockRange mine = comm::algo::two_level_reduce_scatter(
        comm_, comm_.machine_of_rank(), grads, n, comm::sum_f32());
    phase.next("optimizer", "optim");
    optimizer_.update(params + mine.begin, grads + mine.begin, bucket.offset + int64_t(mine.begin),
                      int64_t(mine.size()), lr_);
    phase.next("allgather", "comm");
    comm::algo::two_level_allgather(comm_, comm_.machine_of_rank(), params, n, sizeof(float));
    comm_bytes_ += sharded_bytes(b);
  } else if (options_.shard_optimizer && !clip) {
    // Reduce-scatter, this rank's block of the update, allgather: fused into one pass over
    // shared buffers by the thread transport.
    phase.next("sharded update", "comm");
    comm_.sharded_update(
        std::span<float>(grads, n), std::span<float>(params, n), [&](size_t begin, size_t end) {
          optimizer_.update(params + begin, grads + begin, bucket.offset + int64_t(begin),
                            int64_t(end - begin), lr_);
        });
    comm_bytes_ += sharded_bytes(b);
  } else {
    phase.next("allreduce", "comm");
    comm_.allreduce(std::span<float>(grads, n));
    phase.next("optimizer", "optim");
    if (!clip) optimizer_.update(params, grads, bucket.offset, bucket.count, lr_);
    comm_bytes_ += int64_t(sync::fp32_allreduce_wire_bytes(n, world));
  }
  comm_seconds_ += watch.seconds();
}

void AllreduceStrategy::clip_and_update() {
  Stopwatch watch;
  trace::Span span("clip and update", "optim");
  float* grads = model_.grads();
  float* params = model_.params();
  // Each rank's part of the combined gradient: its own blocks when sharded, else all of it.
  auto part = [&](size_t i) {
    const Bucket& b = buckets_[i];
    const comm::BlockRange r = sharded() ? owned(int(i)) : comm::BlockRange{0, size_t(b.count)};
    return std::pair<int64_t, int64_t>(b.offset + int64_t(r.begin), int64_t(r.size()));
  };
  double sq[1] = {0};
  for (size_t i = 0; i < buckets_.size(); ++i) {
    const auto [offset, count] = part(i);
    sq[0] += optim::squared_norm(grads + offset, count);
  }
  if (sharded()) comm_.allreduce(sq, sizeof(sq), comm::sum_f64());
  const float f = optim::clip_factor(sq[0], options_.clip_norm);
  for (size_t i = 0; i < buckets_.size(); ++i) {
    const Bucket& b = buckets_[i];
    const auto [offset, count] = part(i);
    if (f != 1.0f) model_.backend().scale(count, f, grads + offset);
    optimizer_.update(params + offset, grads + offset, offset, count, lr_);
    if (sharded() && bucket_two_level_[i])
      comm::algo::two_level_allgather(comm_, comm_.machine_of_rank(), params + b.offset,
                                      size_t(b.count), sizeof(float));
    else if (sharded())
      comm_.allgather(std::span<float>(params + b.offset, size_t(b.count)));
  }
  // On the step's path after backward: end_step's wait counts it as exposed already.
  stats_.comm_seconds += watch.seconds();
}

bool AllreduceStrategy::exact_now(int b) const {
  return step_ < options_.codec_warmup_steps ||
         buckets_[size_t(b)].count < options_.codec_min_elements;
}

void AllreduceStrategy::combine_compressed(int b) {
  const Bucket& bucket = buckets_[size_t(b)];
  float* grads = model_.grads() + bucket.offset;
  float* params = model_.params() + bucket.offset;
  const size_t n = size_t(bucket.count);
  trace::Span phase;
  float* u = plain_sgd_ ? local_velocity_[size_t(b)].data() : nullptr;
  if (u) {  // momentum correction: send the local velocity u = m u + g
    const float m = options_.momentum_correction;
    for (size_t i = 0; i < n; ++i) grads[i] = u[i] = m * u[i] + grads[i];
  }
  // 1-bit Adam after its warm-up: send this worker's share of the new momentum.
  const bool momentum_exchange = onebit_adam_ && !exact_now(b);
  if (momentum_exchange)
    onebit_adam_->momentum_to_send(grads, bucket.offset, bucket.count, comm_.size());
  if (exact_now(b)) {
    phase.next("allreduce", "comm");
    comm_.allreduce(std::span<float>(grads, n));
    comm_bytes_ += int64_t(sync::fp32_allreduce_wire_bytes(n, comm_.size()));
  } else if (two_level_states_[size_t(b)].n > 0) {
    // fp32 inside the machine, the codec across machines; the same bits on every rank.
    sync::TwoLevelCompressedState& st = two_level_states_[size_t(b)];
    phase.next("two-level compressed allreduce", "comm");
    sync::two_level_compressed_allreduce(comm_, *options_.codec, std::span<float>(grads, n), st);
    comm_bytes_ += int64_t(st.wire_bytes());
  } else {
    // The decoded sum is the same bits on every rank, so full updates keep replicas equal.
    sync::CompressedAllreduceState& st = codec_states_[size_t(b)];
    phase.next("compressed allreduce", "comm");
    sync::compressed_allreduce(comm_, *options_.codec, std::span<float>(grads, n), st);
    if (u && options_.momentum_masking) {
      // Where the codec sent all that was pending (its residual is now zero), that velocity
      // has been applied; masking drops it rather than let the momentum carry it on.
      const compress::CodecState& r = st.worker[0];  // kGather: the whole bucket
      for (size_t i = 0; i < n; ++i)
        if (r.residual_value(i) == 0.0f) u[i] = 0.0f;
    }
    comm_bytes_ += int64_t(st.wire_bytes);
  }
  if (u) {
    phase.next("optimizer", "optim");
    plain_sgd_->update(params, grads, bucket.offset, bucket.count, lr_);
  } else if (momentum_exchange) {
    phase.next("optimizer", "optim");
    onebit_adam_->apply_momentum(params, grads, bucket.offset, bucket.count, lr_);
  } else if (!(options_.clip_norm > 0.0f)) {  // clipping updates once the norm is known
    phase.next("optimizer", "optim");
    optimizer_.update(params, grads, bucket.offset, bucket.count, lr_);
  }
}

void AllreduceStrategy::on_gradients_ready(const nn::ParamRange& range) {
  const int b = tracker_.ready(range);
  if (b < 0) return;
  if (trace::enabled())
    trace::instant(fmt::format("bucket {} ready", b), "bucket", {{"bucket", b}});
  if (queue_) {
    // On a device, bucket b's combine waits for exactly the work queued so far (its gradients
    // and the layer's input gradient, which reads the parameters the update will write), not
    // for the rest of backward that the compute thread goes on to queue.
    model_.backend().mark(b);
    queue_->post([this, b] {
      SideStream side(model_.backend(), b);
      combine(b);
    });
  } else if (options_.combine != CombineWhere::kAfterBackward) {
    combine(b);  // here, while the bucket's gradients are still in cache
  }              // else combined in end_step, after the whole backward
}

void AllreduceStrategy::end_step() {
  Stopwatch waited;
  trace::Span wait("wait for comm", "comm");  // timeline: the exposed part of communication
  if (queue_) {
    queue_->wait_idle();
    model_.backend().join_side();  // the next forward reads what the comm thread updated
  } else if (options_.combine == CombineWhere::kAfterBackward) {
    for (size_t b = 0; b < buckets_.size(); ++b) combine(int(b));
  }
  if (options_.clip_norm > 0.0f) clip_and_update();
  // Once per step, not per bucket: each check waits for the device.
  if (device_codec_)
    sync::check_device_codec_finite(*device_codec_,
                                    fmt::format("step {} ({} buckets)", step_, buckets_.size()));
  stats_.exposed_seconds += waited.seconds();
  if (options_.combine == CombineWhere::kInline && comm_.size() > 1) {
    // Combined inside backward: all of it was on the step's path, and the loop's compute
    // clock, which spans backward, counted it too.
    stats_.exposed_seconds += comm_seconds_;
    stats_.exposed_in_compute += comm_seconds_;
  }
  stats_.comm_seconds += comm_seconds_;
  stats_.bytes_sent += comm_bytes_;
  if (comm_.size() > 1) ++stats_.exchanges;
  comm_seconds_ = 0;
  comm_bytes_ = 0;
}

}  // namespace loom::sync

namespace loom::sync {

void AllreduceStrategy::save_state(StrategyState& out) const {
  for (size_t b = 0; b < codec_states_.size(); ++b) {
    if (two_level_states_[b].n > 0)
      save_codec_states(two_level_states_[b].cross, fmt::format("bucket{}.node_shard", b), out);
    else
      save_codec_states(codec_states_[b], fmt::format("bucket{}", b), out);
  }
  for (size_t b = 0; b < local_velocity_.size(); ++b)
    out.floats[fmt::format("bucket{}.local_velocity", b)] = local_velocity_[b];
  for (size_t b = 0; b < device_states_.size(); ++b) {
    const sync::DeviceAllreduceState& st = device_states_[b];
    std::vector<float>& r = out.floats[fmt::format("bucket{}.device.residual", b)];
    r.resize(st.n);
    model_.backend().copy_to_host(r.data(), st.residual.data(), st.n * sizeof(float));
    std::vector<uint8_t>& steps = out.bytes[fmt::format("bucket{}.device.steps", b)];
    steps.resize(sizeof(uint64_t));
    std::memcpy(steps.data(), &st.steps, sizeof(uint64_t));
  }
}

void AllreduceStrategy::restore_state(const StrategyState& in) {
  for (size_t b = 0; b < codec_states_.size(); ++b) {
    if (two_level_states_[b].n > 0)
      restore_codec_states(two_level_states_[b].cross, fmt::format("bucket{}.node_shard", b), in);
    else
      restore_codec_states(codec_states_[b], fmt::format("bucket{}", b), in);
  }
  for (size_t b = 0; b < local_velocity_.size(); ++b)
    local_velocity_[b] =
        in.need_floats(fmt::format("bucket{}.local_velocity", b), local_velocity_[b].size());
  for (size_t b = 0; b < device_states_.size(); ++b) {
    sync::DeviceAllreduceState& st = device_states_[b];
    const auto& r = in.need_floats(fmt::format("bucket{}.device.residual", b), st.n);
    model_.backend().copy_to_device(st.residual.data(), r.data(), st.n * sizeof(float));
    std::memcpy(&st.steps,
                in.need_bytes(fmt::format("bucket{}.device.steps", b), sizeof(uint64_t)).data(),
                sizeof(uint64_t));
  }
}

std::vector<std::pair<int64_t, int64_t>> AllreduceStrategy::optimizer_owned() const {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (!sharded()) return out;
  for (const Bucket& b : buckets_) {
    const comm::BlockRange r = comm::block_range(size_t(b.count), comm_.size(), comm_.rank());
    if (r.size() > 0) out.emplace_back(b.offset + int64_t(r.begin), int64_t(r.size()));
  }
  return out;
}

std::string AllreduceStrategy::restore_resharded(const std::vector<StrategyState>& ranks) {
  std::vector<std::string> inexact;
  for (const StrategyState& st : ranks)
    for (const auto& [name, v] : st.floats)
      if (name.find(".device.") != std::string::npos)
        throw ConfigError(fmt::format(
            "the checkpoint holds codec residuals in device memory (backend = \"cuda\"), which "
            "a resume does not carry to another world size; resume on {} worker{}",
            ranks.size(), ranks.size() == 1 ? "" : "s"));
  if (device_codec_)
    throw ConfigError(
        "a codec on device memory (backend = \"cuda\") resumes on the checkpoint's world size "
        "only");
  // Codec residuals: what each rank's codec held back of the summed gradient. Their sum goes to
  // rank 0 of the new world, so the residuals still add up to what is owed. A world of one runs
  // no codec: there is nothing to send them with, and all at once in one step they would be
  // many steps' held-back gradient (top-k keeps most of it back), so they are dropped.
  bool residuals = false;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const std::string prefix = fmt::format("bucket{}", b);
    const std::vector<double> total =
        add_saved_residuals(ranks, prefix, size_t(buckets_[b].count), {});
    residuals =
        residuals || std::any_of(total.begin(), total.end(), [](double x) { return x != 0.0; });
    if (compressed()) restore_summed_residuals(codec_states_[b], prefix, total, ranks[0]);
  }
  if (residuals)
    inexact.push_back(compressed() ? "the codec residuals of every rank are summed and handed "
                                     "to rank 0 (their sum is kept, not how the ranks shared it)"
                                   : "the codec residuals are dropped (this run runs no codec "
                                     "to send them with: a world of one sends nothing)");
  // Momentum correction: the workers' velocities add up to the global one; its recurrence is
  // linear, so their sum on rank 0 (zero elsewhere) keeps the sum the next steps add to.
  bool velocities = false;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const std::string name = fmt::format("bucket{}.local_velocity", b);
    std::vector<double> sum(size_t(buckets_[b].count), 0.0);
    for (const StrategyState& st : ranks) {
      auto it = st.floats.find(name);
      if (it == st.floats.end()) continue;
      velocities = true;
      if (it->second.size() != sum.size())
        throw InputError(fmt::format(
            "checkpoint: strategy section '{}' holds {} floats, bucket {} has {} (another "
            "config?)",
            name, it->second.size(), b, sum.size()));
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += double(it->second[i]);
    }
    if (b < local_velocity_.size())
      for (size_t i = 0; i < sum.size(); ++i)
        local_velocity_[b][i] = comm_.rank() == 0 ? float(sum[i]) : 0.0f;
  }
  if (velocities && local_velocity_.empty())
    inexact.push_back(
        "the workers' velocities of sync.momentum_correction are dropped (a world of one "
        "applies the optimizer's own momentum, which starts at zero)");
  else if (!velocities && !local_velocity_.empty())
    inexact.push_back(
        "sync.momentum_correction's velocities start at zero (the checkpoint's world of one "
        "kept its momentum in the optimizer, which this world does not apply)");
  else if (velocities)
    inexact.push_back(
        "the workers' velocities of sync.momentum_correction are summed and handed to rank 0");
  std::string out;
  for (const std::string& s : inexact) out += (out.empty() ? "" : "; ") + s;
  return out;
}

}  // namespace loom::sync
