// One rank of a ThreadWorld (see thread_world.h).
#pragma once

#include <memory>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/comm/thread/thread_world_state.h"

namespace loom::comm {

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<ThreadWorldState> world, int rank);

  int rank() const override { return rank_; }
  int size() const override { return world_->size(); }
  std::string name() const override { return "thread"; }
  bool in_one_process() const override { return true; }

  Request isend(int peer, const void* data, size_t bytes, int tag) override;
  Request irecv(int peer, void* data, size_t bytes, int tag) override;
  void wait(Request& request) override;
  void abort(const std::string& reason) override;

  // Native collectives: reduce and copy straight between the ranks' buffers.
  using Communicator::allgather;
  using Communicator::allreduce;
  using Communicator::broadcast;
  using Communicator::reduce_scatter;
  void allreduce(void* data, size_t bytes, const Reducer& reducer) override;
  void reduce_scatter(void* data, size_t bytes, const Reducer& reducer) override;
  void allgather(void* data, size_t bytes, size_t elem_size) override;
  void broadcast(void* data, size_t bytes, int root) override;
  void barrier() override;
  void sharded_update(std::span<float> grads, std::span<float> params,
                      const BlockUpdate& update) override;

 private:
  std::shared_ptr<ThreadRequest> make_request(int peer, size_t bytes, int tag, bool is_send);
  void check_peer(int peer, int tag, const char* op) const;
  // Publishes `data` and meets the other ranks; checks every rank passed the same byte count.
  void publish(void* data, size_t bytes, const char* op);
  // Sums block `b` (in elements) over all ranks' published buffers; writes it to every buffer
  // (to_all) or to this rank's only.
  void reduce_block(const BlockRange& b, const Reducer& reducer, bool to_all);

  std::shared_ptr<ThreadWorldState> world_;
  int rank_;
  std::vector<const float*> src_ptrs_;  // reduce_block's buffer tables, kept to not allocate
  std::vector<float*> dst_ptrs_;
  std::vector<const std::byte*> src_bytes_;  // the same for any other reducer
  std::vector<std::byte*> dst_bytes_;
};

}  // namespace loom::comm
