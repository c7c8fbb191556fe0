#include "loom/comm/communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "loom/comm/algorithms.h"
#include "loom/core/error.h"
#include "loom/core/log.h"

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

std::vector<std::string> allreduce_algorithm_names() {
  return {"auto", "ring", "halving-doubling", "two-level"};
}

std::string allreduce_algorithm_name(AllreduceAlgorithm a) {
  switch (a) {
    case AllreduceAlgorithm::kAuto:
      return "auto";
    case AllreduceAlgorithm::kRing:
      return "ring";
    case AllreduceAlgorithm::kHalvingDoubling:
      return "halving-doubling";
    case AllreduceAlgorithm::kTwoLevel:
      return "two-level";
  }
  return "?";
}

std::vector<int> consecutive_machines(int world_size, int ranks_per_node) {
  LOOM_CHECK(world_size >= 0 && ranks_per_node > 0, "{} ranks per machine", ranks_per_node);
  std::vector<int> m(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r) m[size_t(r)] = r / ranks_per_node;
  return m;
}

int MachineLayout::ranks_per_machine() const {
  if (ranks.empty()) return 0;
  for (const auto& m : ranks)
    if (m.size() != ranks.front().size()) return 0;
  return int(ranks.front().size());
}

std::string MachineLayout::describe() const {
  const int per = ranks_per_machine();
  if (per > 0)
    return fmt::format("{} machine{} x {} rank{}", machines(), machines() == 1 ? "" : "s", per,
                       per == 1 ? "" : "s");
  std::string counts;
  for (const auto& m : ranks) counts += (counts.empty() ? "" : ", ") + std::to_string(m.size());
  return fmt::format("{} machines with {} ranks", machines(), counts);
}

MachineLayout machine_layout(std::span<const int> machine_of_rank, int world_size) {
  MachineLayout l;
  if (machine_of_rank.empty()) {
    l.ranks.emplace_back();
    for (int r = 0; r < world_size; ++r) l.ranks.back().push_back(r);
    return l;
  }
  LOOM_CHECK(int(machine_of_rank.size()) == world_size, "{} machine ids for {} ranks",
             machine_of_rank.size(), world_size);
  // Ranks are visited in increasing order, so machines come out numbered by their lowest rank.
  std::map<int, size_t> index;
  for (int r = 0; r < world_size; ++r) {
    auto [it, fresh] = index.emplace(machine_of_rank[size_t(r)], l.ranks.size());
    if (fresh) l.ranks.emplace_back();
    l.ranks[it->second].push_back(r);
  }
  return l;
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

void Communicator::set_machines(std::vector<int> machine_of_rank) {
  const MachineLayout layout = machine_layout(machine_of_rank, size());
  machine_of_rank_ = std::move(machine_of_rank);
  const int per = layout.ranks_per_machine();
  two_level_applies_ = layout.machines() > 1 && per > 1;
  const bool asked = options_.algorithm == AllreduceAlgorithm::kTwoLevel;
  const std::string faked = options_.ranks_per_node > 0
                                ? fmt::format(" (comm.ranks_per_node = {} over {} ranks)",
                                              options_.ranks_per_node, size())
                                : std::string();
  if (asked && per == 0) {
    throw ConfigError(fmt::format(
        "comm.algorithm = \"two-level\" needs the same number of ranks on every machine, but "
        "the {} ranks run on {}{}: place as many ranks on each machine, or use comm.algorithm = "
        "\"auto\" (flat on such a layout)",
        size(), layout.describe(), faked));
  }
  if (rank() != 0 || size() == 1) return;  // one line per world, from rank 0
  if (asked && layout.machines() == 1) {
    log_warn(
        "comm.algorithm = \"two-level\": all {} ranks run on one machine{}, so allreduce takes "
        "the transport's flat path (comm.ranks_per_node fakes machines)",
        size(), faked);
  } else if (asked && per == 1) {
    log_warn(
        "comm.algorithm = \"two-level\": every machine runs one rank{}, so allreduce takes the "
        "transport's flat path (two-level would be one allreduce across machines)",
        faked);
  } else if (options_.algorithm == AllreduceAlgorithm::kAuto && per == 0) {
    log_info(
        "comm.algorithm = \"auto\": the ranks run on {}{}, so allreduce stays flat "
        "(two-level needs the same number of ranks on every machine)",
        layout.describe(), faked);
  }
}

Communicator::AllreducePath Communicator::allreduce_path(size_t bytes) const {
  switch (options_.algorithm) {
    case AllreduceAlgorithm::kRing:
      return AllreducePath::kRing;
    case AllreduceAlgorithm::kHalvingDoubling:
      return AllreducePath::kHalvingDoubling;
    case AllreduceAlgorithm::kTwoLevel:
      return two_level_applies_ ? AllreducePath::kTwoLevel : AllreducePath::kTransport;
    case AllreduceAlgorithm::kAuto:
      // Small buffers are latency-bound: the flat path's fewer messages win there.
      return two_level_applies_ && bytes >= options_.small_message_bytes
                 ? AllreducePath::kTwoLevel
                 : AllreducePath::kTransport;
  }
  return AllreducePath::kTransport;
}

bool Communicator::allreduce_by_algorithm(void* data, size_t bytes, const Reducer& reducer) {
  const AllreducePath path = allreduce_path(bytes);
  if (path == AllreducePath::kTransport) return false;
  check_reducer(reducer, bytes);
  const size_t count = bytes / reducer.elem_size;
  switch (path) {
    case AllreducePath::kRing:
      algo::ring_allreduce(*this, data, count, reducer);
      break;
    case AllreducePath::kHalvingDoubling:
      algo::halving_doubling_allreduce(*this, data, count, reducer);
      break;
    case AllreducePath::kTwoLevel:
      algo::two_level_allreduce(*this, machine_of_rank_, data, count, reducer);
      break;
    case AllreducePath::kTransport:
      break;
  }
  return true;
}

void Communicator::allreduce(void* data, size_t bytes, const Reducer& reducer) {
  check_reducer(reducer, bytes);
  const size_t count = bytes / reducer.elem_size;
  if (size() == 1) return;
  if (allreduce_by_algorithm(data, bytes, reducer)) return;
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
