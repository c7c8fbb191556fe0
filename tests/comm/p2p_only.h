// A Communicator that forwards only point-to-point to another one, so its collectives are the
// generic algorithms of communicator.cc: what a transport without native collectives runs.
#pragma once

#include "loom/comm/communicator.h"

namespace loom::comm::testing {

class P2POnly final : public Communicator {
 public:
  P2POnly(Communicator& inner, CommOptions o) : Communicator(o), inner_(inner) {
    inner_.set_timeout(o.timeout_s);
  }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string name() const override { return "p2p-only(" + inner_.name() + ")"; }
  Request isend(int p, const void* d, size_t b, int t) override { return inner_.isend(p, d, b, t); }
  Request irecv(int p, void* d, size_t b, int t) override { return inner_.irecv(p, d, b, t); }
  void wait(Request& r) override { inner_.wait(r); }
  void abort(const std::string& why) override { inner_.abort(why); }

 private:
  Communicator& inner_;
};

}  // namespace loom::comm::testing
