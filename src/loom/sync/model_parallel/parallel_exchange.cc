#include "loom/sync/model_parallel/parallel_exchange.h"

#include <cstring>

#include "loom/core/error.h"
#include "loom/core/timer.h"

namespace loom::sync {

ActivationExchange::ActivationExchange(comm::Communicator& comm,
                                       std::shared_ptr<compress::Codec> codec)
    : comm_(comm), codec_(std::move(codec)) {
  if (codec_) codec_->set_error_feedback(false);
  enc_.resize(size_t(comm_.size()) + 1);
}

std::string ActivationExchange::describe() const {
  return codec_ ? fmt::format("{} activations (error feedback off)", codec_->name())
                : std::string("fp32 activations");
}

int64_t ActivationExchange::take_bytes() {
  const int64_t b = bytes_;
  bytes_ = 0;
  return b;
}

double ActivationExchange::take_seconds() {
  const double s = seconds_;
  seconds_ = 0;
  return s;
}

void ActivationExchange::exchange_layout(int64_t rows, int64_t sample_offset) {
  const int n = comm_.size();
  std::vector<int64_t> pairs(size_t(2 * n), 0);
  pairs[size_t(2 * comm_.rank())] = rows;
  pairs[size_t(2 * comm_.rank() + 1)] = sample_offset;
  if (n > 1) {
    Stopwatch w;
    comm_.allgather(pairs.data(), pairs.size() * sizeof(int64_t), 2 * sizeof(int64_t));
    bytes_ += int64_t((n - 1) * 2 * sizeof(int64_t));
    seconds_ += w.seconds();
  }
  layout_.counts.assign(size_t(n), 0);
  layout_.starts.assign(size_t(n), 0);
  layout_.offsets.assign(size_t(n), 0);
  layout_.total = 0;
  for (int q = 0; q < n; ++q) {
    layout_.counts[size_t(q)] = pairs[size_t(2 * q)];
    layout_.offsets[size_t(q)] = pairs[size_t(2 * q + 1)];
    layout_.starts[size_t(q)] = layout_.total;
    layout_.total += pairs[size_t(2 * q)];
  }
}

void ActivationExchange::all_to_all(const std::vector<const void*>& send,
                                    const std::vector<size_t>& send_bytes,
                                    const std::vector<void*>& recv,
                                    const std::vector<size_t>& recv_bytes) {
  const int n = comm_.size(), me = comm_.rank();
  std::vector<comm::Request> reqs;
  reqs.reserve(size_t(2 * n));
  for (int k = 1; k < n; ++k) {  // post receives first, then sends, peers in a rotated order
    const int q = (me + n - k) % n;
    if (recv_bytes[size_t(q)] > 0)
      reqs.push_back(comm_.irecv(q, recv[size_t(q)], recv_bytes[size_t(q)], kExchangeTag));
  }
  for (int k = 1; k < n; ++k) {
    const int q = (me + k) % n;
    if (send_bytes[size_t(q)] > 0) {
      reqs.push_back(comm_.isend(q, send[size_t(q)], send_bytes[size_t(q)], kExchangeTag));
      bytes_ += int64_t(send_bytes[size_t(q)]);
    }
  }
  comm_.wait_all(reqs);
}

compress::CodecState& ActivationExchange::state_for(size_t n) {
  auto it = states_.find(n);
  if (it == states_.end())
    it = states_.emplace(n, codec_->make_state(n, fmt::format("activations ({} floats)", n))).first;
  return it->second;
}

std::vector<std::byte>& ActivationExchange::enc(int slot, size_t bytes) {
  auto& b = enc_[size_t(slot)];
  if (b.size() < bytes) b.resize(bytes + 64);
  return b;
}

size_t ActivationExchange::encode(const float* x, size_t n, int slot) {
  const size_t bytes = codec_->encoded_bytes(n);
  auto& b = enc(slot, bytes);
  codec_->encode(std::span<const float>(x, n), state_for(n), std::span<std::byte>(b.data(), bytes));
  return bytes;
}

void ActivationExchange::gather_rows(const float* mine, int64_t f, float* all, bool lossy) {
  const int n = comm_.size(), me = comm_.rank();
  const RowLayout& L = layout_;
  Stopwatch w;
  std::vector<const void*> send(static_cast<size_t>(n));
  std::vector<size_t> send_bytes(static_cast<size_t>(n)), recv_bytes(static_cast<size_t>(n));
  std::vector<void*> recv(static_cast<size_t>(n));
  if (!lossy || !codec_) {
    std::memcpy(all + L.starts[size_t(me)] * f, mine, size_t(L.counts[size_t(me)] * f) * 4);
    for (int q = 0; q < n; ++q) {
      send[size_t(q)] = mine;
      send_bytes[size_t(q)] = size_t(L.counts[size_t(me)] * f) * 4;
      recv[size_t(q)] = all + L.starts[size_t(q)] * f;
      recv_bytes[size_t(q)] = size_t(L.counts[size_t(q)] * f) * 4;
    }
    if (n > 1) all_to_all(send, send_bytes, recv, recv_bytes);
    seconds_ += w.seconds();
    return;
  }
  // Encoded: slot `me` holds my encoding, slot q the one received from q.
  const size_t my_bytes = encode(mine, size_t(L.counts[size_t(me)] * f), me);
  for (int q = 0; q < n; ++q) {
    send[size_t(q)] = enc_[size_t(me)].data();
    send_bytes[size_t(q)] = my_bytes;
    recv_bytes[size_t(q)] = codec_->encoded_bytes(size_t(L.counts[size_t(q)] * f));
    if (q != me) recv[size_t(q)] = enc(q, recv_bytes[size_t(q)]).data();
  }
  if (n > 1) all_to_all(send, send_bytes, recv, recv_bytes);
  for (int q = 0; q < n; ++q) {  // my own block decoded too: every rank holds the same bits
    const size_t cnt = size_t(L.counts[size_t(q)] * f);
    codec_->decode(std::span<const std::byte>(enc_[size_t(q)].data(), recv_bytes[size_t(q)]),
                   std::span<float>(all + L.starts[size_t(q)] * f, cnt),
                   compress::DecodeMode::kWrite);
  }
  seconds_ += w.seconds();
}

void ActivationExchange::reduce_scatter_rows(const float* partial, int64_t f, float* mine) {
  const int n = comm_.size(), me = comm_.rank();
  const RowLayout& L = layout_;
  const size_t my_n = size_t(L.counts[size_t(me)] * f);
  Stopwatch w;
  std::vector<const void*> send(static_cast<size_t>(n));
  std::vector<size_t> send_bytes(static_cast<size_t>(n)), recv_bytes(static_cast<size_t>(n));
  std::vector<void*> recv(static_cast<size_t>(n));
  const size_t slot_bytes = codec_ ? codec_->encoded_bytes(my_n) : my_n * 4;
  // Received pieces go into one staging area, slot q at q * slot_bytes (rounded to floats).
  const size_t stride = (slot_bytes + 3) / 4;
  if (scratch_.size() < stride * size_t(n)) scratch_.resize(stride * size_t(n));
  for (int q = 0; q < n; ++q) {
    const size_t cnt = size_t(L.counts[size_t(q)] * f);
    const float* block = partial + L.starts[size_t(q)] * f;
    if (q != me) {
      if (codec_) {
        send_bytes[size_t(q)] = encode(block, cnt, q);
        send[size_t(q)] = enc_[size_t(q)].data();
      } else {
        send_bytes[size_t(q)] = cnt * 4;
        send[size_t(q)] = block;
      }
    }
    recv[size_t(q)] = scratch_.data() + size_t(q) * stride;
    recv_bytes[size_t(q)] = slot_bytes;
  }
  if (n > 1) all_to_all(send, send_bytes, recv, recv_bytes);
  // Sum in rank order (the same order whatever the arrival order): deterministic.
  const float* own = partial + L.starts[size_t(me)] * f;
  for (int q = 0; q < n; ++q) {
    const compress::DecodeMode mode =
        q == 0 ? compress::DecodeMode::kWrite : compress::DecodeMode::kAccumulate;
    if (q == me) {
      if (q == 0) {
        std::memcpy(mine, own, my_n * 4);
      } else {
        for (size_t i = 0; i < my_n; ++i) mine[i] += own[i];
      }
    } else if (codec_) {
      codec_->decode(
          std::span<const std::byte>(
              reinterpret_cast<const std::byte*>(scratch_.data() + size_t(q) * stride), slot_bytes),
          std::span<float>(mine, my_n), mode);
    } else {
      const float* in = scratch_.data() + size_t(q) * stride;
      if (q == 0) {
        std::memcpy(mine, in, my_n * 4);
      } else {
        for (size_t i = 0; i < my_n; ++i) mine[i] += in[i];
      }
    }
  }
  seconds_ += w.seconds();
}

void ActivationExchange::allreduce(float* data, int64_t count) {
  const int n = comm_.size();
  if (n == 1 || count == 0) return;
  Stopwatch w;
  if (!codec_) {
    comm_.allreduce(std::span<float>(data, size_t(count)));
    bytes_ += int64_t(sync::fp32_allreduce_wire_bytes(size_t(count), n));
  } else {
    auto it = allreduce_states_.find(size_t(count));
    if (it == allreduce_states_.end())
      it = allreduce_states_
               .emplace(size_t(count), sync::make_compressed_allreduce_state(
                                           *codec_, size_t(count), n, comm_.rank(),
                                           fmt::format("activation sum ({} floats)", count)))
               .first;
    sync::compressed_allreduce(comm_, *codec_, std::span<float>(data, size_t(count)), it->second);
    bytes_ += int64_t(it->second.wire_bytes);
  }
  seconds_ += w.seconds();
}

void ActivationExchange::gather_columns(const float* mine, int64_t rows, int64_t total_cols,
                                        float* all) {
  const int n = comm_.size(), me = comm_.rank();
  Stopwatch w;
  std::vector<const void*> send(static_cast<size_t>(n));
  std::vector<size_t> send_bytes(static_cast<size_t>(n)), recv_bytes(static_cast<size_t>(n));
  std::vector<void*> recv(static_cast<size_t>(n));
  // Column blocks travel as contiguous [rows, cols_q] pieces; staging in scratch_.
  std::vector<size_t> at(size_t(n) + 1, 0);
  for (int q = 0; q < n; ++q) {
    const size_t cnt = size_t(rows) * comm::block_range(size_t(total_cols), n, q).size();
    const size_t bytes = codec_ ? codec_->encoded_bytes(cnt) : cnt * 4;
    recv_bytes[size_t(q)] = bytes;
    at[size_t(q) + 1] = at[size_t(q)] + (bytes + 3) / 4;
  }
  if (scratch_.size() < at[size_t(n)]) scratch_.resize(at[size_t(n)]);
  const size_t my_cnt = size_t(rows) * comm::block_range(size_t(total_cols), n, me).size();
  float* my_slot = scratch_.data() + at[size_t(me)];
  if (codec_) {
    const size_t bytes = encode(mine, my_cnt, me);
    std::memcpy(my_slot, enc_[size_t(me)].data(), bytes);
  } else {
    std::memcpy(my_slot, mine, my_cnt * 4);
  }
  for (int q = 0; q < n; ++q) {
    send[size_t(q)] = my_slot;
    send_bytes[size_t(q)] = recv_bytes[size_t(me)];
    recv[size_t(q)] = scratch_.data() + at[size_t(q)];
  }
  if (n > 1) all_to_all(send, send_bytes, recv, recv_bytes);
  std::vector<float> block;
  for (int q = 0; q < n; ++q) {
    const comm::BlockRange cols = comm::block_range(size_t(total_cols), n, q);
    const size_t cnt = size_t(rows) * cols.size();
    const float* src = scratch_.data() + at[size_t(q)];
    if (codec_) {
      block.resize(cnt);
      codec_->decode(std::span<const std::byte>(reinterpret_cast<const std::byte*>(src),
                                                recv_bytes[size_t(q)]),
                     std::span<float>(block.data(), cnt), compress::DecodeMode::kWrite);
      src = block.data();
    }
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(all + r * total_cols + int64_t(cols.begin), src + size_t(r) * cols.size(),
                  cols.size() * 4);
  }
  seconds_ += w.seconds();
}

}  // namespace loom::sync
