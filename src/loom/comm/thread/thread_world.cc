#include "loom/comm/thread/thread_world.h"

#include <fmt/format.h>

#include <exception>
#include <mutex>
#include <thread>

#include "loom/comm/thread/thread_communicator.h"
#include "loom/comm/thread/thread_world_state.h"
#include "loom/core/error.h"

namespace loom::comm {

ThreadWorld::ThreadWorld(int size, CommOptions options) {
  if (size < 1) throw ConfigError(fmt::format("thread transport: world size {} < 1", size));
  if (!(options.timeout_s > 0)) {
    throw ConfigError(fmt::format("comm.timeout_s = {} must be > 0", options.timeout_s));
  }
  state_ = std::make_shared<ThreadWorldState>(size, options);
  for (int r = 0; r < size; ++r) comms_.push_back(std::make_unique<ThreadCommunicator>(state_, r));
  // Every thread runs on this machine; comm.ranks_per_node may fake several.
  const std::vector<int> machines = options.ranks_per_node > 0
                                        ? consecutive_machines(size, options.ranks_per_node)
                                        : std::vector<int>();
  for (auto& c : comms_) c->set_machines(machines);
}

ThreadWorld::~ThreadWorld() = default;

int ThreadWorld::size() const {
  return state_->size();
}

Communicator& ThreadWorld::comm(int r) {
  LOOM_CHECK(r >= 0 && r < size(), "rank {} of {}", r, size());
  return *comms_[size_t(r)];
}

void ThreadWorld::run(const std::function<void(Communicator&)>& fn) {
  const int n = size();
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  auto body = [&](int r) {
    try {
      fn(*comms_[size_t(r)]);
    } catch (const std::exception& e) {
      errors[size_t(r)] = std::current_exception();
      // Wake the others now rather than at their timeout (a no-op if already aborted).
      state_->abort(fmt::format("rank {} failed: {}", r, e.what()), r);
    } catch (...) {
      errors[size_t(r)] = std::current_exception();
      state_->abort(fmt::format("rank {} failed", r), r);
    }
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < n; ++r) threads.emplace_back(body, r);
  body(0);
  for (auto& t : threads) t.join();
  // Report the root cause: the error of the rank that aborted the world first.
  const int origin = state_->abort_origin();
  if (origin >= 0 && errors[size_t(origin)]) std::rethrow_exception(errors[size_t(origin)]);
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

namespace {

class ThreadWorldAdapter final : public World {
 public:
  ThreadWorldAdapter(int n, const CommOptions& o) : world_(n, o) {}
  std::string transport() const override { return "thread"; }
  int size() const override { return world_.size(); }
  int local_size() const override { return world_.size(); }
  Communicator& local(int i) override { return world_.comm(i); }
  void run(const std::function<void(Communicator&)>& fn) override { world_.run(fn); }

 private:
  ThreadWorld world_;
};

}  // namespace

std::unique_ptr<World> make_thread_world(int workers, const CommOptions& options) {
  return std::make_unique<ThreadWorldAdapter>(workers, options);
}

}  // namespace loom::comm
