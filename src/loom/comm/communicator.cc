#include "loom/comm/communicator.h"

#include <algorithm>
#include <cstring>

#include "loom/comm/algorithms.h"
#include "loom/core/error.h"

namespace loom::comm {

namespace {

// Plain loops; -O2 with -march=x86-64-v3 vectorises them (AVX2).
template <typename T>
void sum_fn(void* acc, const void* in, size_t count) {
  T* __restrict a = static_cast<T*>(acc);
  const T* __restrict b = static_cast<const T*>(in);
  for (size_t i = 0; i < count; ++i) a[i] += b[i];
}

void max_i64_fn(void* acc, const void* in, size_t count) {
  int64_t* a = static_cast<int64_t*>(acc);
  const int64_t* b = static_cast<const int64_t*>(in);
  for (size_t i = 0; i < count; ++i) a[i] = std::max(a[i], b[i]);
}

void check_reducer(const Reducer& r, size_t bytes) {
  LOOM_CHECK(r.fn != nullptr && r.elem_size > 0, "reducer without a function or element size");
  LOOM_CHECK(bytes % r.elem_size == 0, "{} bytes is not a whole number of {}-byte elements", bytes,
             r.elem_size);
}

}  // namespace

Reducer sum_f32() {
  return {sizeof(float), &sum_fn<float>, true};
}
Reducer sum_f64() {
  return {sizeof(double), &sum_fn<double>};
}
Reducer sum_i64() {
  return {sizeof(int64_t), &sum_fn<int64_t>};
}
Reducer max_i64() {
  return {sizeof(int64_t), &max_i64_fn};
}

BlockRange block_range(size_t count, int n, int r) {
  LOOM_CHECK(n > 0 && r >= 0 && r < n, "rank {} of world size {}", r, n);
  const size_t base = count / size_t(n), extra = count % size_t(n), ur = size_t(r);
  const size_t begin = ur * base + std::min(ur, extra);
  return {begin, begin + base + (ur < extra ? 1 : 0)};
}

void Communicator::wait_all(std::span<Request> requests) {
  for (Request& r : requests) {
    if (r.pending()) wait(r);
  }
}

void Communicator::send(int peer, const void* data, size_t bytes, int tag) {
  Request r = isend(peer, data, bytes, tag);
  wait(r);
}

void Communicator::recv(int peer, void* data, size_t bytes, int tag) {
  Request r = irecv(peer, data, bytes, tag);
  wait(r);
}

int Communicator::next_collective_tag() {
  // 2^14 tags above the user range keep every tag below 2^15, MPI's smallest allowed TAG_UB.
  const int tag = kCollectiveTagBase + int(collective_seq_ % uint32_t(kCollectiveTagBase));
  ++collective_seq_;
  return tag;
}

void Communicator::allreduce(std::span<float> data) {
  allreduce(data.data(), data.size_bytes(), sum_f32());
}
void Communicator::reduce_scatter(std::span<float> data) {
  reduce_scatter(data.data(), data.size_bytes(), sum_f32());
}
void Communicator::allgather(std::span<float> data) {
  allgather(data.data(), data.size_bytes(), sizeof(float));
}
void Communicator::broadcast(std::span<float> data, int root) {
  broadcast(data.data(), data.size_bytes(), root);
}

void Communicator::allreduce(void* data, size_t bytes, const Reducer& reducer) {
  check_reducer(reducer, bytes);
  const size_t count = bytes / reducer.elem_size;
  if (size() == 1) return;
  if (bytes < options_.small_message_bytes) {
    algo::halving_doubling_allreduce(*this, data, count, reducer);
  } else {
    algo::ring_allreduce(*this, data, count, reducer);
  }
}

void Communicator::reduce_scatter(void* data, size_t bytes, const Reducer& reducer) {
  check_reducer(reducer, bytes);
  algo::ring_reduce_scatter(*this, data, bytes / reducer.elem_size, reducer);
}

void Communicator::allgather(void* data, size_t bytes, size_t elem_size) {
  LOOM_CHECK(elem_size > 0 && bytes % elem_size == 0, "{} bytes in {}-byte elements", bytes,
             elem_size);
  algo::ring_allgather(*this, data, bytes / elem_size, elem_size);
}

void Communicator::broadcast(void* data, size_t bytes, int root) {
  LOOM_CHECK(root >= 0 && root < size(), "broadcast root {} outside world of size {}", root,
             size());
  algo::binomial_broadcast(*this, data, bytes, root);
}

void Communicator::barrier() {
  algo::dissemination_barrier(*this);
}

void Communicator::sharded_update(std::span<float> grads, std::span<float> params,
                                  const BlockUpdate& update) {
  LOOM_CHECK(grads.size() == params.size(), "sharded_update: {} gradients but {} parameters",
             grads.size(), params.size());
  reduce_scatter(grads);
  const BlockRange mine = block_range(grads.size(), size(), rank());
  if (mine.size() > 0) update(mine.begin, mine.end);
  allgather(params);
}

}  // namespace loom::comm
