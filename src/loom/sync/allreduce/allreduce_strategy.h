// Data parallelism by bucketed allreduce overlapped with backward.
//
// Each bucket's gradients are combined on the worker's communication thread as soon as
// backward has produced them. With the optimizer sharded (sync.shard_optimizer, the default)
// a bucket is reduce-scattered, each rank updates the block it owns (optimizer state is flat
// and sliced by offset, so the arithmetic per element is exactly that of a full update), and
// the updated parameters are all-gathered: every replica ends the step with the same bits,
// and each rank does 1/N of the optimizer's memory traffic (ZeRO stage 1, Rajbhandari et al.
// 2020). Without sharding, the bucket is all-reduced and every rank updates all of it. Where
// the communicator's allreduce runs two-level (comm.algorithm, docs/comm.md) a bucket it
// carries is all-reduced two-level, or, sharded, reduce-scattered in two levels (inside the
// machine, then the machine's block across machines: comm::algo::two_level_reduce_scatter), each
// rank updates the 1/(L M) it then owns, and the parameters are all-gathered in two levels: the
// flat sharded update's traffic, with most of it kept inside each machine.
//
// With a codec (options.codec, config key `codec`), each bucket's gradient travels through
// sync::compressed_allreduce instead, and the strategy owns that bucket's codec state
// (the worker- and owner-side residuals of error feedback, PowerSGD's warm-started Q). The
// optimizer is then not sharded: the decoded sum is the same bits on every rank, so every
// rank updates the whole bucket from it and the replicas stay identical. (Sharding would
// need the updated parameters all-gathered in fp32, which is the very traffic the codec
// removes.) Where the bucket's allreduce runs two-level, the host codec runs two-level too
// (two_level_compressed_allreduce.h): fp32 inside each machine, the codec only across machines,
// its error feedback kept per node-shard; PowerSGD, momentum masking (which reads each worker's
// own residual) and device codecs keep the flat exchange, and describe() says so. A world of
// one sends nothing, so it skips the codec. With gradients in device
// memory (the nccl transport) the codec runs as device kernels and the encodings are
// all-gathered (device_compressed_allreduce.h); PowerSGD has no device kernels. On a device
// the communication thread works on the backend's side stream (Backend::enter_side), after
// the mark the compute thread recorded when the bucket's gradients were queued, so NCCL moves
// bucket 0 while backward goes on; the compute stream joins it at end_step, where the codecs'
// NaN/Inf flag is read once for the whole step.
//
// Around the codec (AllreduceOptions; keys and defaults in plan/strategy_factory.cc, measurements
// in docs/compress.md): a warm-up of exact sums before the codec starts, momentum correction
// (each worker sends its own velocity), buckets too small to compress summed exactly, and the
// encodings of a striped codec gathered instead.
//
// The loss gradient is scaled by 1/(global batch), so the sum over ranks is the mean.
//
// Clipping (options.clip_norm, optim.clip_norm) scales the combined gradient, the mean over all
// workers' gradients, to a global norm of at most clip_norm before the update. The norm needs
// every bucket, so buckets are still combined as they become ready but the update waits for
// end_step. Without sharding every rank holds the whole combined gradient (with a codec: the
// decoded sum, the same bits on every rank), so each computes the same norm. With the optimizer
// sharded, buckets are reduce-scattered, the squares of each rank's own blocks are summed over
// ranks (one allreduce of a double), each rank scales and updates its blocks, and the
// parameters are all-gathered. A lossy codec therefore clips what it decoded, the gradient the
// optimizer applies, not the workers' exact sum; the codec's residuals keep what it did not
// send, unscaled.
#pragma once

#include <memory>
#include <optional>

#include "loom/compress/codec.h"
#include "loom/optim/onebit_adam.h"
#include "loom/sync/allreduce/buckets.h"
#include "loom/sync/allreduce/compressed_allreduce.h"
#include "loom/sync/allreduce/device_compressed_allreduce.h"
#include "loom/sync/allreduce/two_level_compressed_allreduce.h"
#include "loom/sync/background_queue.h"
#include "loom/sync/strategy.h"

namespace loom::sync {

// Where a worker combines its gradient buckets (sync.overlap; the default in overlap_policy.h).
enum class CombineWhere {
  kThread,         // true: on a background thread while backward goes on
  kInline,         // "inline": on the compute thread as soon as backward has produced each
  kAfterBackward,  // false: all of them once backward is done
};

struct AllreduceOptions {
  int64_t bucket_bytes = 4 << 20;                // sync.bucket_kib
  CombineWhere combine = CombineWhere::kThread;  // sync.overlap
  bool shard_optimizer = true;                   // sync.shard_optimizer (ignored with a codec)
  // nullptr: plain fp32 collectives. Otherwise every bucket goes through the compressed
  // allreduce with this codec (the identity codec included, which tests use).
  std::shared_ptr<const compress::Codec> codec;
  // How each bucket's compressed sum is formed (compressed_allreduce.h): the codec's own
  // aggregation (nullopt), or kGather for a codec summed in stripes (codec.aggregation).
  std::optional<compress::Aggregation> aggregation;
  // Momentum correction (Lin et al., ICLR 2018, "Deep Gradient Compression", section 3.2;
  // for 1-bit, the momentum compression of Tang et al. 2021, "1-bit Adam", applied to SGD):
  // each worker keeps its own velocity u = m u + g and sends u through the codec, whose
  // residual then accumulates velocity, not gradients; the decoded sum is applied as plain
  // SGD (sgd_weight_decay, no momentum), so momentum is not applied twice. Summed over the
  // workers the velocities are the global one, so without compression this is momentum SGD;
  // with it, what the codec holds back is delayed but no longer fed through the momentum
  // again. 0 = off; otherwise m (sync.momentum_correction takes optim.momentum).
  float momentum_correction = 0.0f;
  // DGC's momentum factor masking (section 3.3), with momentum correction and a sparsifying
  // codec (top-k): u is zeroed where the codec sent everything that was pending.
  bool momentum_masking = false;
  float sgd_weight_decay = 0.0f;
  float clip_norm = 0.0f;  // optim.clip_norm (0 = off)
  // The first codec_warmup_steps steps sum every bucket exactly (the fp32 allreduce, and
  // the velocities with momentum correction); the codec starts at that step with its error
  // feedback residuals still zero.
  int64_t codec_warmup_steps = 0;
  // Buckets of fewer elements than this skip the codec and are summed exactly (fp32).
  int64_t codec_min_elements = 0;
};

class AllreduceStrategy final : public Strategy {
 public:
  AllreduceStrategy(comm::Communicator& comm, nn::Model& model, optim::Optimizer& optimizer,
                    AllreduceOptions options);
  std::string describe() const override;
  void start() override;
  float grad_scale(int64_t local_batch) const override;
  void begin_step(int64_t step, float lr) override;
  void on_gradients_ready(const nn::ParamRange& range) override;
  void end_step() override;
  // Codec state per bucket: worker- and owner-side residuals, PowerSGD's Q, encode counts
  // (sections "bucket<b>.worker<j>.{residual,aux,steps}", "bucket<b>.owner.*"; a bucket whose
  // codec runs two-level keeps its node-shard's under "bucket<b>.node_shard.worker<j>.*" and
  // "bucket<b>.node_shard.owner.*"), and with momentum correction each bucket's local velocity
  // ("bucket<b>.local_velocity").
  void save_state(StrategyState& out) const override;
  void restore_state(const StrategyState& in) override;
  // Another world size: the codec residuals and momentum correction's velocities summed and
  // handed to rank 0 (a world of one runs no codec: dropped). The optimizer's state the
  // checkpoint puts together itself (optimizer_owned).
  std::string restore_resharded(const std::vector<StrategyState>& ranks) override;
  // Sharded: this rank's block of every bucket.
  std::vector<std::pair<int64_t, int64_t>> optimizer_owned() const override;

  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Bytes this rank hands to the transport per step (what SyncStats.bytes_sent adds up).
  int64_t bytes_per_step() const { return bytes_per_step_; }

 private:
  void combine(int b);
  // With clipping: the norm of the combined gradient, then every bucket's update.
  void clip_and_update();
  // Bucket b through the host codec (or exactly, in the warm-up and for small buckets), and
  // its update (deferred to clip_and_update when clipping).
  void combine_compressed(int b);
  bool compressed() const { return options_.codec != nullptr && comm_.size() > 1; }
  bool sharded() const { return options_.shard_optimizer && !options_.codec && comm_.size() > 1; }
  // The elements of bucket b this rank updates when sharded (flat or two-level block).
  comm::BlockRange owned(int b) const;
  // Bytes this rank sends for bucket b's sharded update (reduce-scatter and allgather).
  int64_t sharded_bytes(int b) const;
  // Whether bucket b is summed exactly at the current step (warm-up, or too small to compress).
  bool exact_now(int b) const;

  comm::Communicator& comm_;
  bool two_level_ = false;                 // some bucket's allreduce runs two-level
  std::vector<uint8_t> bucket_two_level_;  // per bucket: its allreduce runs two-level
  comm::algo::TwoLevelGroups groups_;      // this rank's machine and local index, where two_level_
  // Why codec buckets stay flat although their allreduce runs two-level ("" where they do not).
  std::string codec_flat_because_;
  nn::Model& model_;
  optim::Optimizer& optimizer_;
  AllreduceOptions options_;
  std::vector<Bucket> buckets_;
  BucketTracker tracker_;
  // Momentum correction: each bucket's local velocity, and the momentum-free update.
  std::vector<std::vector<float>> local_velocity_;
  std::unique_ptr<optim::Optimizer> plain_sgd_;
  // optim.name = "onebit_adam": after the exact warm-up each bucket exchanges the momentum
  // (optim/onebit_adam.h); null for any other optimizer.
  optim::OnebitAdam* onebit_adam_ = nullptr;
  std::vector<sync::CompressedAllreduceState> codec_states_;  // one per bucket (host)
  // One per bucket (host codec); active (n > 0) where the bucket's codec runs two-level, whose
  // codec_states_ entry is then empty.
  std::vector<sync::TwoLevelCompressedState> two_level_states_;
  // Gradients in device memory (nccl): the codec's device kernels and per-bucket device state
  // (compress/device_compressed_allreduce.h) instead of codec_states_.
  std::unique_ptr<compress::DeviceCodec> device_codec_;
  std::vector<sync::DeviceAllreduceState> device_states_;
  std::unique_ptr<BackgroundQueue> queue_;
  int64_t bytes_per_step_ = 0;
  int64_t codec_cross_bytes_ = 0;  // of those, encoded bytes to other machines (two-level codec)
  int64_t step_ = 0;
  float lr_ = 0;
  double comm_seconds_ = 0;  // written by the comm thread, read after wait_idle()
  int64_t comm_bytes_ = 0;   // likewise
};

// "int8 (error feedback on), 1.86 MB/step sent per rank, 1/3.9 of fp32's 7.45 MB": for logs.
std::string describe_wire(const compress::Codec* codec, int64_t bytes_per_step,
                          int64_t fp32_bytes_per_step);

}  // namespace loom::sync
