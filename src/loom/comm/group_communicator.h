// A group of a communicator's ranks seen as a communicator of its own: rank i of the group is
// parent rank members[i]. Point-to-point goes through the parent (rank arithmetic only, no
// transport of its own), so every algorithm of algorithms.h runs on a group over any
// transport; its collectives are the generic ones (a transport's native collectives span the
// whole parent). Tags come from the parent's collective sequence, so a group's messages never
// share a tag with the parent's other collectives; every rank of the parent must therefore
// draw the same number of tags (run the same collectives, group or not), as for any
// collective. Used by two_level_allreduce for the ranks of one machine and for the ranks that
// own one block across machines.
#pragma once

#include <vector>

#include "loom/comm/communicator.h"

namespace loom::comm {

class GroupCommunicator final : public Communicator {
 public:
  // `members`: distinct parent ranks, the calling rank among them.
  GroupCommunicator(Communicator& parent, std::vector<int> members);

  int rank() const override { return rank_; }
  int size() const override { return int(members_.size()); }
  std::string name() const override { return parent_.name(); }
  bool in_one_process() const override { return parent_.in_one_process(); }
  bool device_memory() const override { return parent_.device_memory(); }

  Request isend(int peer, const void* data, size_t bytes, int tag) override;
  Request irecv(int peer, void* data, size_t bytes, int tag) override;
  void wait(Request& request) override { parent_.wait(request); }
  void abort(const std::string& reason) override { parent_.abort(reason); }
  int next_collective_tag() override { return parent_.next_collective_tag(); }

  // The parent rank of group rank i.
  int parent_rank(int i) const;

 private:
  Communicator& parent_;
  std::vector<int> members_;
  int rank_ = -1;
};

}  // namespace loom::comm
