#include "loom/comm/thread/thread_communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "loom/comm/sum_to_all.h"
#include "loom/core/error.h"

namespace loom::comm {

namespace {

// Copies a matched send into its receive, or records why they do not fit.
void deliver(const PendingOp& send, const PendingOp& recv, int src, int dst, ThreadWorldState& w) {
  if (send.bytes != recv.bytes) {
    const std::string msg = fmt::format(
        "rank {} sent {} bytes with tag {} to rank {}, which posted a receive of {} bytes", src,
        send.bytes, send.req->tag, dst, recv.bytes);
    send.req->error = msg;
    recv.req->error = msg;
  } else if (send.bytes > 0) {
    std::memcpy(recv.buf, send.buf, send.bytes);
  }
  w.complete(*send.req);
  w.complete(*recv.req);
}

// The first queued op from `peer` with `tag`, removed from the queue; false if none.
bool take(std::deque<PendingOp>& q, int peer, int tag, PendingOp& out) {
  for (auto it = q.begin(); it != q.end(); ++it) {
    if (it->peer == peer && it->tag == tag) {
      out = std::move(*it);
      q.erase(it);
      return true;
    }
  }
  return false;
}

}  // namespace

ThreadCommunicator::ThreadCommunicator(std::shared_ptr<ThreadWorldState> world, int rank)
    : Communicator(world->options()), world_(std::move(world)), rank_(rank) {}

void ThreadCommunicator::check_peer(int peer, int tag, const char* op) const {
  if (world_->aborted()) world_->throw_aborted();
  if (peer < 0 || peer >= size() || peer == rank_) {
    throw CommError(
        fmt::format("rank {}: {} to/from rank {} outside the world of {} ranks (or "
                    "itself)",
                    rank_, op, peer, size()));
  }
  if (tag < 0 || tag >= 2 * kCollectiveTagBase) {
    throw CommError(fmt::format("rank {}: {} with tag {} outside [0, {})", rank_, op, tag,
                                2 * kCollectiveTagBase));
  }
}

std::shared_ptr<ThreadRequest> ThreadCommunicator::make_request(int peer, size_t bytes, int tag,
                                                                bool is_send) {
  auto req = std::make_shared<ThreadRequest>();
  req->world = world_.get();
  req->peer = peer;
  req->tag = tag;
  req->bytes = bytes;
  req->is_send = is_send;
  req->owner = rank_;
  return req;
}

Request ThreadCommunicator::isend(int peer, const void* data, size_t bytes, int tag) {
  check_peer(peer, tag, "isend");
  auto req = make_request(peer, bytes, tag, true);
  PendingOp mine{rank_, tag, const_cast<void*>(data), bytes, req};
  RankSlot& box = world_->slot(peer);
  PendingOp match;
  bool found;
  {
    std::lock_guard<std::mutex> lk(box.box_mu);
    found = take(box.recvs, rank_, tag, match);
    if (!found) box.sends.push_back(mine);
  }
  if (found) deliver(mine, match, rank_, peer, *world_);
  return Request(std::move(req));
}

Request ThreadCommunicator::irecv(int peer, void* data, size_t bytes, int tag) {
  check_peer(peer, tag, "irecv");
  auto req = make_request(peer, bytes, tag, false);
  PendingOp mine{peer, tag, data, bytes, req};
  RankSlot& box = world_->slot(rank_);
  PendingOp match;
  bool found;
  {
    std::lock_guard<std::mutex> lk(box.box_mu);
    found = take(box.sends, peer, tag, match);
    if (!found) box.recvs.push_back(mine);
  }
  if (found) deliver(match, mine, peer, rank_, *world_);
  return Request(std::move(req));
}

void ThreadCommunicator::wait(Request& request) {
  if (!request.pending()) return;
  auto* req = static_cast<ThreadRequest*>(request.state());
  world_->block_until(
      rank_, req->peer, options_.timeout_s, [req] { return req->done.load(); }, req);
  if (!req->error.empty()) {
    world_->abort(req->error, rank_);
    world_->throw_aborted();
  }
  request.reset();
}

void ThreadCommunicator::abort(const std::string& reason) {
  world_->abort(fmt::format("rank {}: {}", rank_, reason), rank_);
}

void ThreadCommunicator::publish(void* data, size_t bytes, const char* op) {
  RankSlot& me = world_->slot(rank_);
  me.shared_buf = data;
  me.shared_bytes = bytes;
  world_->barrier(rank_, options_.timeout_s);
  for (int q = 0; q < size(); ++q) {
    const size_t theirs = world_->slot(q).shared_bytes;
    if (theirs != bytes) {
      const std::string msg = fmt::format("{}: rank {} passed {} bytes but rank {} passed {}", op,
                                          rank_, bytes, q, theirs);
      world_->abort(msg, rank_);
      world_->throw_aborted();
    }
  }
}

void ThreadCommunicator::reduce_block(const BlockRange& b, const Reducer& red, bool to_all) {
  const int n = size();
  // Sums in rank order 0..n-1, so every rank's copy of every element has the same bits.
  if (red.sum_f32_kind) {
    // The common case (gradients): one pass, sums in registers, no staging copy.
    std::vector<const float*>& src = src_ptrs_;
    std::vector<float*>& dst = dst_ptrs_;
    src.clear();
    dst.clear();
    for (int q = 0; q < n; ++q)
      src.push_back(static_cast<const float*>(world_->slot(q).shared_buf));
    if (to_all) {
      for (int q = 0; q < n; ++q) dst.push_back(static_cast<float*>(world_->slot(q).shared_buf));
    } else {
      dst.push_back(static_cast<float*>(world_->slot(rank_).shared_buf));
    }
    sum_to_all_f32(src.data(), n, dst.data(), int(dst.size()), b.begin, b.end);
    return;
  }
  std::vector<const std::byte*>& src = src_bytes_;
  std::vector<std::byte*>& dst = dst_bytes_;
  src.clear();
  dst.clear();
  for (int q = 0; q < n; ++q) {
    auto* buf = static_cast<std::byte*>(world_->slot(q).shared_buf);
    src.push_back(buf);
    if (to_all || q == rank_) dst.push_back(buf);
  }
  reduce_to_all(src.data(), n, dst.data(), int(dst.size()), b.begin, b.end, red);
}

void ThreadCommunicator::allreduce(void* data, size_t bytes, const Reducer& red) {
  LOOM_CHECK(red.fn != nullptr && red.elem_size > 0 && bytes % red.elem_size == 0,
             "{} bytes in {}-byte elements", bytes, red.elem_size);
  if (size() == 1) return;
  if (allreduce_by_algorithm(data, bytes, red)) return;  // comm.algorithm over point-to-point
  publish(data, bytes, "allreduce");
  reduce_block(block_range(bytes / red.elem_size, size(), rank_), red, true);
  world_->barrier(rank_, options_.timeout_s);  // nobody returns while others still write
}

void ThreadCommunicator::reduce_scatter(void* data, size_t bytes, const Reducer& red) {
  LOOM_CHECK(red.fn != nullptr && red.elem_size > 0 && bytes % red.elem_size == 0,
             "{} bytes in {}-byte elements", bytes, red.elem_size);
  if (size() == 1) return;
  publish(data, bytes, "reduce_scatter");
  reduce_block(block_range(bytes / red.elem_size, size(), rank_), red, false);
  world_->barrier(rank_, options_.timeout_s);
}

void ThreadCommunicator::allgather(void* data, size_t bytes, size_t es) {
  LOOM_CHECK(es > 0 && bytes % es == 0, "{} bytes in {}-byte elements", bytes, es);
  if (size() == 1) return;
  publish(data, bytes, "allgather");
  for (int q = 0; q < size(); ++q) {
    const BlockRange b = block_range(bytes / es, size(), q);
    if (q != rank_ && b.size() > 0) {
      std::memcpy(static_cast<std::byte*>(data) + b.begin * es,
                  static_cast<std::byte*>(world_->slot(q).shared_buf) + b.begin * es,
                  b.size() * es);
    }
  }
  world_->barrier(rank_, options_.timeout_s);
}

void ThreadCommunicator::broadcast(void* data, size_t bytes, int root) {
  LOOM_CHECK(root >= 0 && root < size(), "broadcast root {} outside world of size {}", root,
             size());
  if (size() == 1) return;
  publish(data, bytes, "broadcast");
  if (rank_ != root && bytes > 0) std::memcpy(data, world_->slot(root).shared_buf, bytes);
  world_->barrier(rank_, options_.timeout_s);
}

void ThreadCommunicator::sharded_update(std::span<float> grads, std::span<float> params,
                                        const BlockUpdate& update) {
  LOOM_CHECK(grads.size() == params.size(), "sharded_update: {} gradients but {} parameters",
             grads.size(), params.size());
  const BlockRange mine = block_range(grads.size(), size(), rank_);
  if (size() == 1) {
    if (mine.size() > 0) update(mine.begin, mine.end);
    return;
  }
  world_->slot(rank_).shared_params = params.data();
  publish(grads.data(), grads.size_bytes(), "sharded_update");
  // Tiles small enough that the sum, the update's reads and writes and the copies out find the
  // tile in L1, so the summed gradient and the updated parameters are not read back from L2/L3
  // as three separate passes did (a 4 MiB bucket's combine: ~325 us against ~338 us unfused on
  // Zen 5; most of what remains is moving blocks between the cores, see docs/comm.md).
  constexpr size_t kTile = 2048;
  std::vector<const float*>& src = src_ptrs_;
  src.clear();
  for (int q = 0; q < size(); ++q)
    src.push_back(static_cast<const float*>(world_->slot(q).shared_buf));
  float* own = grads.data();
  for (size_t t = mine.begin; t < mine.end; t += kTile) {
    const size_t e = std::min(t + kTile, mine.end);
    sum_to_all_f32(src.data(), size(), &own, 1, t, e);  // the same sum as reduce_scatter's
    update(t, e);
    for (int q = 0; q < size(); ++q)
      if (q != rank_)
        std::memcpy(world_->slot(q).shared_params + t, params.data() + t, (e - t) * sizeof(float));
  }
  world_->barrier(rank_, options_.timeout_s);  // every block written before anyone reads on
}

void ThreadCommunicator::barrier() {
  if (size() == 1) return;
  world_->barrier(rank_, options_.timeout_s);
}

}  // namespace loom::comm
