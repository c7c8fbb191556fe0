// A Communicator that counts the bytes its rank sends to every peer and forwards point-to-point
// only (so its collectives are the generic algorithms), for tests of what crosses machines.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/comm/communicator.h"

namespace loom::comm::testing {

class Counting final : public Communicator {
 public:
  Counting(Communicator& inner, std::vector<int64_t>& sent)
      : Communicator(inner.options()), inner_(inner), sent_(sent) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string name() const override { return "counting"; }
  Request isend(int p, const void* d, size_t b, int t) override {
    sent_[size_t(p)] += int64_t(b);
    return inner_.isend(p, d, b, t);
  }
  Request irecv(int p, void* d, size_t b, int t) override { return inner_.irecv(p, d, b, t); }
  void wait(Request& r) override { inner_.wait(r); }
  void abort(const std::string& why) override { inner_.abort(why); }

 private:
  Communicator& inner_;
  std::vector<int64_t>& sent_;
};

}  // namespace loom::comm::testing
