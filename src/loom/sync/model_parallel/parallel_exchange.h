// The exchanges of model parallelism (docs/model_parallel.md): what the model-parallel layers
// send between the workers of one group, with the activations and activation gradients
// optionally through a codec (8-bit activations: Dettmers 2016, the int8 dynamic tree).
//
// The row blocks of a gathered batch are the ranks' local batches in rank order; their sizes
// may differ (the last evaluation chunk), so every forward starts by exchanging (rows, global
// sample offset) of every rank: layout().
//
// Codecs and residuals: activations are new values every step (other samples, other
// parameters), so an error-feedback residual carried to the next message would add one
// batch's quantisation error to another batch's activations. The codec given here therefore
// runs with error feedback OFF: every message is quantised afresh and its error is bounded by
// the codec's bin width (int8 dynamic tree: half a bin, at most 0.45/64 ~ 0.7% of the block's
// absolute maximum; tests/sync/model_parallel_test.cc measures it end to end). Every rank decodes
// every block, its own included, so all ranks compute on the same bits and replicated
// parameters downstream stay identical.
//
// Point-to-point messages use tag kExchangeTag; the caller runs these on the worker thread
// while no other collective is in flight on the communicator (the strategy's reduction of
// data-parallel gradients starts only after the model-parallel part's backward is done).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/compress/codec.h"
#include "loom/sync/allreduce/compressed_allreduce.h"

namespace loom::sync {

inline constexpr int kExchangeTag = 0x2a0d;

struct RowLayout {
  std::vector<int64_t> counts;   // rows of each rank
  std::vector<int64_t> starts;   // first row of each rank's block in the gathered batch
  std::vector<int64_t> offsets;  // global sample index of each rank's first row (dropout)
  int64_t total = 0;
};

class ActivationExchange {
 public:
  // codec: nullptr for fp32 (exact); otherwise its error feedback is switched off (above).
  ActivationExchange(comm::Communicator& comm, std::shared_ptr<compress::Codec> codec);

  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  const compress::Codec* codec() const { return codec_.get(); }
  std::string describe() const;

  // Every rank's (rows, sample offset) -> layout().
  void exchange_layout(int64_t rows, int64_t sample_offset);
  const RowLayout& layout() const { return layout_; }

  // mine [counts[rank], f] -> all [total, f], rank blocks in rank order. `lossy`: through the
  // codec (activations); false: fp32 (the loss gradient).
  void gather_rows(const float* mine, int64_t f, float* all, bool lossy);
  // partial [total, f] is this rank's partial sum; mine [counts[rank], f] becomes the sum over
  // ranks of this rank's rows (summed in rank order).
  void reduce_scatter_rows(const float* partial, int64_t f, float* mine);
  // In place: data becomes the sum over ranks (same bits on every rank).
  void allreduce(float* data, int64_t n);
  // mine [rows, block_range(total_cols, N, rank)] -> all [rows, total_cols].
  void gather_columns(const float* mine, int64_t rows, int64_t total_cols, float* all);

  // Payload bytes this rank handed to the transport, and seconds spent, since the last take.
  int64_t take_bytes();
  double take_seconds();

 private:
  // Sends send[q] (send_bytes[q]) to every q != rank and receives recv[q] from it.
  void all_to_all(const std::vector<const void*>& send, const std::vector<size_t>& send_bytes,
                  const std::vector<void*>& recv, const std::vector<size_t>& recv_bytes);
  compress::CodecState& state_for(size_t n);
  // Encodes n floats into enc_[slot] (grown as needed); returns the encoded size.
  size_t encode(const float* x, size_t n, int slot);
  std::vector<std::byte>& enc(int slot, size_t bytes);

  comm::Communicator& comm_;
  std::shared_ptr<compress::Codec> codec_;
  RowLayout layout_;
  std::map<size_t, compress::CodecState> states_;
  std::map<size_t, sync::CompressedAllreduceState> allreduce_states_;
  std::vector<std::vector<std::byte>> enc_;  // one encode buffer per rank slot
  std::vector<float> scratch_;
  int64_t bytes_ = 0;
  double seconds_ = 0;
};

}  // namespace loom::sync
