// The only file with #if LOOM_HAVE_MPI / LOOM_HAVE_NCCL (docs/architecture.md: one registry knows
// the build).
#include "loom/comm/transport_registry.h"

#include <fmt/format.h>

#include "loom/comm/launcher_env.h"
#include "loom/comm/thread/thread_world.h"
#include "loom/config.h"
#include "loom/core/error.h"

#if LOOM_HAVE_MPI
#include "loom/comm/mpi/mpi_world.h"
#endif
#if LOOM_HAVE_NCCL
#include "loom/comm/nccl/nccl_communicator.h"
#include "loom/comm/nccl/nccl_world.h"
#endif

namespace loom::comm {

const std::vector<TransportKind>& transport_kinds() {
  static const std::vector<TransportKind> kinds = {
      {"thread", "one worker per thread of this process, point-to-point through shared memory",
       true, "", false, false, true},
      {"mpi", "one worker per MPI rank (mpirun), node shared memory for ranks on one machine",
       LOOM_HAVE_MPI != 0, "-DLOOM_MPI=ON (needs libopenmpi-dev)", false, true, true},
      {"nccl", "one GPU per worker, NCCL's collectives on device buffers", LOOM_HAVE_NCCL != 0,
       "-DLOOM_CUDA=ON (needs nvcc, and nccl.h and libnccl, under /usr/local/cuda on these "
       "machines)",
       true, true, true},
  };
  return kinds;
}

std::vector<std::string> known_transports() {
  std::vector<std::string> names;
  for (const TransportKind& k : transport_kinds()) names.push_back(k.name);
  return names;
}

const TransportKind& transport_kind(const std::string& name) {
  for (const TransportKind& k : transport_kinds())
    if (k.name == name) return k;
  throw ConfigError(fmt::format("unknown transport '{}': choose auto, {}", name,
                                fmt::join(known_transports(), ", ")));
}

bool transport_built(const std::string& name) {
  for (const TransportKind& k : transport_kinds())
    if (k.name == name) return k.built;
  return false;
}

std::string resolve_transport(const std::string& name) {
  if (name == "auto") return (LOOM_HAVE_MPI && launched_by_mpi()) ? "mpi" : "thread";
  const TransportKind& k = transport_kind(name);
  if (!k.built)
    throw ConfigError(fmt::format(
        "transport '{}' was not built into this loom: reconfigure with {}", name, k.build_hint));
  return name;
}

namespace {

// The workers' host world: threads, or the ranks an MPI launcher started.
std::unique_ptr<World> host_world(const std::string& t, int workers, const CommOptions& options) {
  if (t == "thread") {
    if (workers < 1) throw ConfigError(fmt::format("workers = {} must be >= 1", workers));
    return make_thread_world(workers, options);
  }
#if LOOM_HAVE_MPI
  std::unique_ptr<World> w = make_mpi_world(options);
  if (workers != 0 && workers != w->size()) {
    throw ConfigError(fmt::format(
        "workers = {} but the MPI launcher started {} ranks: pass -np {} or leave workers unset",
        workers, w->size(), workers));
  }
  return w;
#else
  throw ConfigError("transport 'mpi' was not built into this loom: reconfigure with -DLOOM_MPI=ON");
#endif
}

}  // namespace

bool transport_uses_launcher(const std::string& transport) {
  const std::string t = resolve_transport(transport);
  return t == "mpi" || (t == "nccl" && LOOM_HAVE_MPI && launched_by_mpi());
}

std::unique_ptr<World> create_world(const std::string& transport, int workers,
                                    const CommOptions& options) {
  const std::string t = resolve_transport(transport);
  if (!(options.timeout_s > 0)) {
    throw ConfigError(fmt::format("comm.timeout_s = {} must be > 0", options.timeout_s));
  }
  if (t != "nccl") return host_world(t, workers, options);
  if (options.algorithm != AllreduceAlgorithm::kAuto) {
    // Its collectives are NCCL's own on device memory (which already ring or tree across
    // machines); the algorithms of algorithms.h reduce in host memory.
    throw ConfigError(fmt::format(
        "comm.algorithm = \"{}\" runs on host memory (transports thread and mpi); the nccl "
        "transport uses NCCL's own collectives: leave comm.algorithm = \"auto\"",
        allreduce_algorithm_name(options.algorithm)));
  }
#if LOOM_HAVE_NCCL
  // NCCL's id travels through the host world: MPI ranks under a launcher, else threads.
  return make_nccl_world(
      host_world(transport_uses_launcher(t) ? "mpi" : "thread", workers, options), options);
#else
  throw ConfigError(
      "transport 'nccl' was not built into this loom: reconfigure with -DLOOM_CUDA=ON");
#endif
}

Backend* device_backend(const Communicator& c) {
#if LOOM_HAVE_NCCL
  if (const auto* nccl = dynamic_cast<const NcclCommunicator*>(&c)) return nccl->backend();
#else
  (void)c;
#endif
  return nullptr;
}

bool mpi_node_shared_memory(const Communicator& c) {
#if LOOM_HAVE_MPI
  return mpi_uses_node_shared_memory(c);
#else
  (void)c;
  return false;
#endif
}

bool vendor_allreduce(Communicator& c, std::span<float> data) {
#if LOOM_HAVE_MPI
  return mpi_vendor_allreduce(c, data);
#else
  (void)c;
  (void)data;
  return false;
#endif
}

}  // namespace loom::comm
