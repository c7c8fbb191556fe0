// Blockwise model-update filtering (BMUF, "block momentum"): Chen & Huo, "Scalable training
// of deep learning machines by incremental block training with intra-block parallel
// optimization and blockwise model-update filtering", ICASSP 2016; in the form of CNTK's v2
// BlockMomentumDistributedLearner.
//
// Every worker runs its optimizer locally (its own gradients, scaled by 1/local batch) for
// tau steps: one "block". Then the block deltas are averaged over workers (through any
// codec: the strategy owns the residuals) and filtered by block-level momentum:
//
//   G(t) = W_prev - (1/N) sum_i W_i(t)             averaged block delta (a descent direction)
//   V(t) = eta V(t-1) + (1 - eta) zeta G(t)        block momentum; eta default 1 - 1/N,
//                                                  zeta ("block learning rate") default 1
//   W(t) = W_prev - V(t)                           the global model
//   W_prev <- W(t) - eta V(t)  with Nesterov (default), else W(t): where every worker
//                                                  starts the next block
//
// and each worker's local optimizer state (momentum) is reset after a block (default). The
// paper's v1 form has no (1 - eta) factor; CNTK's v2 form keeps V at the scale of one
// averaged delta, so zeta = 1 is neutral.
//
// Special cases the tests pin: tau = 1, eta = 0, zeta = 1 (and no local momentum carried
// over) is synchronous SGD: W = mean_i(W_prev - lr g_i) = W_prev - lr mean_i(g_i). One worker
// with eta = 0 is local SGD.
//
// finish() folds in a last partial block, so the model after training is the global one.
#pragma once

#include <memory>
#include <vector>

#include "loom/compress/codec.h"
#include "loom/sync/allreduce/buckets.h"
#include "loom/sync/allreduce/compressed_allreduce.h"
#include "loom/sync/strategy.h"

namespace loom::sync {

struct BmufOptions {
  int64_t tau = 8;       // bmuf.tau: local steps per block
  double eta = -1;       // bmuf.eta: block momentum in [0, 1); < 0 means 1 - 1/N
  double zeta = 1;       // bmuf.zeta: block learning rate
  bool nesterov = true;  // bmuf.nesterov
  // bmuf.reset_momentum: zero the local optimizer's state at each block. Off by default: with
  // momentum 0.9 the local velocity needs about 10 steps to build, so clearing it every tau = 8
  // steps keeps the local steps short of their size (docs/compress.md, "Block momentum").
  bool reset_momentum = false;
  int64_t chunk_bytes = 4 << 20;  // sync.bucket_kib: the delta travels in chunks this size
  std::shared_ptr<const compress::Codec> codec;  // nullptr: plain fp32 allreduce
};

class BmufStrategy final : public Strategy {
 public:
  BmufStrategy(comm::Communicator& comm, nn::Model& model, optim::Optimizer& optimizer,
               BmufOptions options);
  std::string describe() const override;
  void start() override;
  float grad_scale(int64_t local_batch) const override;
  void begin_step(int64_t step, float lr) override;
  void on_gradients_ready(const nn::ParamRange& range) override;
  void end_step() override;
  void finish() override;
  // W_prev, V, the step count within the block and the codec residuals (sections "bmuf.prev",
  // "bmuf.velocity", "bmuf.steps_in_block", "chunk<c>.*"). A mid-block checkpoint also needs
  // the local parameters and optimizer state, which the checkpoint saves itself.
  void save_state(StrategyState& out) const override;
  void restore_state(const StrategyState& in) override;
  // Another world size, at a block boundary: W_prev and V are the same on every rank and carry
  // over as they are; the codec residuals are summed and handed to rank 0 (a world of one runs
  // no codec: dropped). Mid-block each worker's local model is its own, which the checkpoint
  // does not keep: ConfigError.
  std::string restore_resharded(const std::vector<StrategyState>& ranks) override;

  double eta() const { return eta_; }
  // Bytes this rank sends per block sync.
  int64_t bytes_per_block() const { return bytes_per_block_; }

 private:
  void sync_block();
  bool compressed() const { return options_.codec != nullptr && comm_.size() > 1; }

  comm::Communicator& comm_;
  nn::Model& model_;
  optim::Optimizer& optimizer_;
  BmufOptions options_;
  double eta_;
  std::vector<Bucket> chunks_;
  std::vector<sync::CompressedAllreduceState> codec_states_;  // one per chunk
  std::vector<float> prev_;      // W_prev: where this block started, the same on every rank
  std::vector<float> velocity_;  // V: block momentum
  std::vector<float> delta_;     // scratch: this worker's block delta, then the average
  int64_t steps_in_block_ = 0;
  int64_t bytes_per_block_ = 0;
  float lr_ = 0;
};

}  // namespace loom::sync
