// A process's share of a world of workers: for the thread transport all N workers (threads of
// this process), for MPI the one worker this process is. The training loop runs the same code
// on either: world->run([&](Communicator& c) { ... }). Create one with create_world()
// (transport_registry.h).
#pragma once

#include <functional>
#include <string>

#include "loom/comm/communicator.h"

namespace loom::comm {

class World {
 public:
  virtual ~World() = default;
  virtual std::string transport() const = 0;
  // Workers in the whole world (all processes).
  virtual int size() const = 0;
  // Workers in this process, and the communicator of the i-th of them.
  virtual int local_size() const = 0;
  virtual Communicator& local(int i) = 0;
  // Runs fn on every worker of this process (one thread each for "thread", the calling thread
  // for "mpi") and rethrows the root-cause error if any worker throws.
  virtual void run(const std::function<void(Communicator&)>& fn) = 0;
};

}  // namespace loom::comm
