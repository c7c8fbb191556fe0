#include "loom/comm/group_communicator.h"

#include <algorithm>

#include "loom/core/error.h"

namespace loom::comm {

GroupCommunicator::GroupCommunicator(Communicator& parent, std::vector<int> members)
    : Communicator(parent.options()), parent_(parent), members_(std::move(members)) {
  std::vector<int> sorted = members_;
  std::sort(sorted.begin(), sorted.end());
  LOOM_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(),
             "a group lists a rank twice");
  for (size_t i = 0; i < members_.size(); ++i) {
    LOOM_CHECK(members_[i] >= 0 && members_[i] < parent.size(), "group member {} outside {} ranks",
               members_[i], parent.size());
    if (members_[i] == parent.rank()) rank_ = int(i);
  }
  LOOM_CHECK(rank_ >= 0, "rank {} builds a group it is not in", parent.rank());
}

int GroupCommunicator::parent_rank(int i) const {
  if (i < 0 || i >= size()) {
    throw CommError(fmt::format("rank {}: group rank {} outside a group of {} ranks",
                                parent_.rank(), i, size()));
  }
  return members_[size_t(i)];
}

Request GroupCommunicator::isend(int peer, const void* data, size_t bytes, int tag) {
  return parent_.isend(parent_rank(peer), data, bytes, tag);
}

Request GroupCommunicator::irecv(int peer, void* data, size_t bytes, int tag) {
  return parent_.irecv(parent_rank(peer), data, bytes, tag);
}

}  // namespace loom::comm
