// The thread transport: N workers as threads of one process, sharing memory. The embedded
// default (`loom train` with workers = N needs no launcher).
//
//   loom::comm::ThreadWorld world(4, options);
//   world.run([&](loom::comm::Communicator& c) { ... c.allreduce(grads); ... });
//
// Point-to-point is a rendezvous: whichever of a send and its receive arrives second copies
// the bytes once, straight from the sender's buffer into the receiver's. The collectives
// reduce straight out of the ranks' own buffers (each rank sums its block across all buffers
// and writes the sum back to every buffer), with no staging copy.
//
// Faults: a rank blocked longer than options.timeout_s names the rank that stopped answering,
// following the chain of who waits for whom to the rank that is not waiting on anyone; a rank
// whose function throws aborts the world, so the others fail at once with its message.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/comm/world.h"

namespace loom::comm {

class ThreadWorldState;

class ThreadWorld {
 public:
  explicit ThreadWorld(int size, CommOptions options = {});
  ~ThreadWorld();
  ThreadWorld(const ThreadWorld&) = delete;
  ThreadWorld& operator=(const ThreadWorld&) = delete;

  int size() const;
  // The communicator of rank r; use each from one thread at a time.
  Communicator& comm(int r);
  // Runs fn(comm(r)) on `size` threads (rank 0 on the calling thread) and joins them. If a rank
  // throws, the world is aborted (the others fail fast) and the first error is rethrown here.
  void run(const std::function<void(Communicator&)>& fn);

 private:
  std::shared_ptr<ThreadWorldState> state_;
  std::vector<std::unique_ptr<Communicator>> comms_;
};

// The same workers as a World (world.h), for code that runs on any transport.
std::unique_ptr<World> make_thread_world(int workers, const CommOptions& options);

}  // namespace loom::comm
