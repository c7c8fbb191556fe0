// `loom bench allreduce`: parses options, runs loom::measure::run_allreduce_bench, prints a table
// and JSON lines (one object per row) on rank 0.
#include <fmt/format.h>
#include <sched.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "loom/cli/commands.h"
#include "loom/comm/launcher_env.h"
#include "loom/comm/transport_registry.h"
#include "loom/core/error.h"
#include "loom/core/format_version.h"
#include "loom/measure/allreduce_bench.h"
#include "loom/measure/bench_harness.h"
#include "loom/perf/calibration.h"

namespace loom::cli::bench_allreduce_command {
namespace {

struct Args {
  measure::AllreduceBenchOptions bench;
  std::string transport = "all";
  double timeout_s = 30;
  int64_t ring_chunk_kib = -1;  // -1: CommOptions' default
  bool json_only = false;
};

void run_bench(const Args& a) {
  measure::AllreduceBenchOptions o = a.bench;
  if (a.ring_chunk_kib == 0 || a.ring_chunk_kib < -1)
    throw ConfigError(fmt::format("--ring-chunk-kib {}: must be >= 1", a.ring_chunk_kib));
  if (a.ring_chunk_kib > 0) o.ring_chunk_bytes = size_t(a.ring_chunk_kib) << 10;
  if (a.transport != "all" && a.transport != "thread" && a.transport != "mpi") {
    throw ConfigError(fmt::format("--transport '{}': choose all, thread or mpi", a.transport));
  }
  o.thread = a.transport != "mpi";
  o.mpi = a.transport != "thread";
  std::unique_ptr<comm::World> mpi;
  if (o.mpi && (comm::launched_by_mpi() || a.transport == "mpi")) {
    comm::CommOptions co;
    co.timeout_s = a.timeout_s;
    if (a.ring_chunk_kib > 0) co.ring_chunk_bytes = size_t(a.ring_chunk_kib) << 10;
    mpi = comm::create_world("mpi", 0, co);  // ConfigError naming LOOM_MPI=ON if not built
  }
  const bool speaker = !mpi || mpi->local(0).rank() == 0;
  measure::BenchOutput out(!a.json_only && speaker);
  out.note(fmt::format(
      "allreduce (float sum); busbw = algbw x 2(n-1)/n; vs_mpi = busbw / MPI_Allreduce busbw at "
      "that size{}",
      mpi ? "" : " (run under mpirun to measure the MPI transport and its peer)"));
  out.note(fmt::format("{:>9} {:>17} {:>5} {:>11} {:>11} {:>10} {:>10} {:>7} {:>6} {}", "transport",
                       "algo", "ranks", "bytes", "lat_us", "algbw_GB/s", "busbw_GB/s", "vs_mpi",
                       "iters", "check"));
  if (o.thread && speaker) {
    // mpirun binds each rank to one core by default; the thread transport's threads would
    // then share it and measure the scheduler, not the transport.
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) < o.threads) {
      out.note(fmt::format(
          "warning: this process may run on {} CPU(s) but the thread transport has {} threads "
          "(under mpirun pass --bind-to none)",
          CPU_COUNT(&set), o.threads));
    }
  }
  measure::run_allreduce_bench(mpi.get(), o, [&](const measure::AllreduceBenchRow& r) {
    nlohmann::json j = {{"bench", "allreduce"},
                        {"transport", r.transport},
                        {"algo", r.algo},
                        {"ranks", r.ranks},
                        {"bytes", r.bytes},
                        {"lat_us", r.lat_us},
                        {"algbw_GBps", r.algbw_gbs},
                        {"busbw_GBps", r.busbw_gbs},
                        {"iters", r.iters},
                        {"check", r.ok ? "ok" : "wrong"},
                        {kFormatVersionKey, perf::kCalibrationFormatVersion}};
    if (r.vs_peer > 0) j["busbw_vs_mpi_allreduce"] = r.vs_peer;
    out.row(fmt::format("  {:>9} {:>17} {:>5} {:>11} {:>11.1f} {:>10.3f} {:>10.3f} {:>7} {:>6} {}",
                        r.transport, r.algo, r.ranks, r.bytes, r.lat_us, r.algbw_gbs, r.busbw_gbs,
                        r.vs_peer > 0 ? fmt::format("{:.2f}", r.vs_peer) : "-", r.iters,
                        r.ok ? "ok" : "WRONG"),
            j);
  });
}

CommandRegistrar reg("bench allreduce", [](CLI::App& parent) {
  auto args = std::make_shared<Args>();
  CLI::App* cmd = parent.add_subcommand(
      "allreduce",
      "allreduce latency/algbw/busbw by size (thread; MPI and MPI_Allreduce under mpirun)");
  cmd->add_option("--min-bytes", args->bench.min_bytes, "smallest message (default 4096)");
  cmd->add_option("--max-bytes", args->bench.max_bytes, "largest message (default 268435456)");
  cmd->add_option("--factor", args->bench.factor, "size step factor (default 4)");
  cmd->add_option("--budget", args->bench.budget_s, "seconds per size and variant (default 0.6)");
  cmd->add_option("--iters", args->bench.iters,
                  "fixed calls per repetition (default: from budget)");
  cmd->add_option("--threads", args->bench.threads, "thread-transport world size (default 2)");
  cmd->add_option("--transport", args->transport, "all, thread or mpi (default all)");
  cmd->add_option("--timeout", args->timeout_s,
                  "comm.timeout_s for the MPI transport (default 30)");
  cmd->add_option("--ring-chunk-kib", args->ring_chunk_kib,
                  "pipelining unit of the ring (comm.ring_chunk_kib; default 512)");
  cmd->add_flag("--json", args->json_only, "JSON lines only");
  cmd->callback([args] { run_bench(*args); });
});

}  // namespace
}  // namespace loom::cli::bench_allreduce_command
