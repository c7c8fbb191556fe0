#include "loom/train/transport.h"

#include "loom/comm/thread/thread_world.h"
#include "loom/core/error.h"

namespace loom::train {

TransportPlan plan_transport(const Config& cfg) {
  TransportPlan plan;
  plan.options.timeout_s = cfg.get_double("comm.timeout_s", 30.0, 0.001, 1e6);
  const std::string kind = cfg.get_choice("transport", "auto", {"auto", "thread", "mpi"});
  plan.kind = kind == "auto" ? "thread" : kind;
  if (plan.kind == "mpi")
    throw ConfigError(fmt::format("{}: transport \"mpi\" is not available in this build yet",
                                  cfg.where("transport")));
  plan.world = int(cfg.get_int("workers", 1, 1, 4096));
  return plan;
}

void run_workers(const TransportPlan& plan, const Config& cfg,
                 const std::function<void(comm::Communicator&)>& fn) {
  comm::ThreadWorld world(plan.world, plan.options);
  world.run(fn);
}

}  // namespace loom::train
