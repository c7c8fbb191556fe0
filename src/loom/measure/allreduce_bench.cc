#include "loom/measure/allreduce_bench.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "loom/comm/algorithms.h"
#include "loom/comm/thread/thread_world.h"
#include "loom/comm/transport_registry.h"
#include "loom/core/error.h"
#include "loom/measure/bench_harness.h"

namespace loom::measure {

using namespace loom::comm;

namespace {

using Op = std::function<void(Communicator&, std::span<float>)>;

// The largest value over ranks (time in ns); every rank gets the same answer.
int64_t max_over_ranks(Communicator& c, int64_t v) {
  c.allreduce(&v, sizeof v, max_i64());
  return v;
}

// Times `op` with the harness's call timing (bench_harness.h: calibrated calls per repetition,
// the median of 5), each repetition's time the slowest rank's, so every rank reports the same.
AllreduceBenchRow time_op(Communicator& c, std::vector<float>& buf, size_t count, const Op& op,
                          const AllreduceBenchOptions& o) {
  std::span<float> data(buf.data(), count);
  std::fill(data.begin(), data.end(), 0.0f);  // zeros stay zeros: no overflow, no denormals
  CallOptions co;
  co.budget_s = o.budget_s;
  co.calls = o.iters;
  co.before_rep = [&c] { c.barrier(); };
  co.agree = [&c](double s) { return double(max_over_ranks(c, int64_t(s * 1e9))) * 1e-9; };
  const RepeatTiming timing = time_calls([&] { op(c, data); }, co);
  // Check: inputs that differ on every rank and element, against the closed-form sum.
  const int n = c.size(), r = c.rank();
  for (size_t i = 0; i < count; ++i) data[i] = float(r * 4096 + int(i % 4096) + 1);
  op(c, data);
  int64_t bad = 0;
  for (size_t i = 0; i < count && !bad; ++i) {
    const double want = 4096.0 * n * (n - 1) / 2 + double(n) * double(i % 4096 + 1);
    bad = data[i] != float(want);
  }
  bad = max_over_ranks(c, bad);
  AllreduceBenchRow row;
  const double t = timing.seconds;
  row.ranks = n;
  row.bytes = count * sizeof(float);
  row.lat_us = t * 1e6;
  row.algbw_gbs = double(row.bytes) / t / 1e9;
  row.busbw_gbs = row.algbw_gbs * 2.0 * (n - 1) / n;
  row.iters = timing.calls;
  row.ok = bad == 0;
  return row;
}

}  // namespace

void run_allreduce_bench(World* mpi_world, const AllreduceBenchOptions& o,
                         const std::function<void(const AllreduceBenchRow&)>& on_row) {
  const std::vector<size_t> byte_sizes =
      geometric_sizes(o.min_bytes, o.max_bytes, o.factor, "bench allreduce");
  const size_t max_count = byte_sizes.back() / sizeof(float);
  std::map<size_t, double> peer_busbw;  // MPI_Allreduce's busbw by size, for the ratios
  int proc_rank = 0;

  if (mpi_world != nullptr) {
    Communicator& c = mpi_world->local(0);
    proc_rank = c.rank();
    if (o.mpi) {
      std::vector<float> buf(max_count, 0.0f);
      std::vector<std::pair<std::string, Op>> variants = {
          {"MPI_Allreduce", [](Communicator& cc, std::span<float> d) { vendor_allreduce(cc, d); }},
          // What training gets: the node's shared memory when every rank is on this machine
          // (up to 16 MiB), else the ring.
          {"native", [](Communicator& cc, std::span<float> d) { cc.allreduce(d); }},
          {"ring",
           [](Communicator& cc, std::span<float> d) {
             algo::ring_allreduce(cc, d.data(), d.size(), sum_f32());
           }},
          {"halving-doubling",
           [](Communicator& cc, std::span<float> d) {
             algo::halving_doubling_allreduce(cc, d.data(), d.size(), sum_f32());
           }},
      };
      // What comm.algorithm = "two-level" runs, where the ranks span machines with as many
      // ranks on each: timed beside the flat ring on the same links.
      const MachineLayout layout = machine_layout(c.machine_of_rank(), c.size());
      if (layout.machines() > 1 && layout.ranks_per_machine() > 1) {
        variants.emplace_back("two-level", [](Communicator& cc, std::span<float> d) {
          algo::two_level_allreduce(cc, cc.machine_of_rank(), d.data(), d.size(), sum_f32());
        });
      }
      for (size_t bytes : byte_sizes) {
        for (const auto& [name, op] : variants) {
          if (name == "halving-doubling" && bytes > (1u << 20))
            continue;  // a small-message algorithm
          AllreduceBenchRow row = time_op(c, buf, bytes / sizeof(float), op, o);
          row.transport = "mpi";
          row.algo = name;
          if (name == "MPI_Allreduce") peer_busbw[bytes] = row.busbw_gbs;
          if (peer_busbw.count(bytes)) row.vs_peer = row.busbw_gbs / peer_busbw[bytes];
          if (proc_rank == 0) on_row(row);
        }
      }
    }
  }

  if (o.thread) {
    if (o.threads < 1) throw ConfigError("bench allreduce: --threads must be >= 1");
    if (proc_rank == 0) {
      CommOptions co;
      co.ring_chunk_bytes = o.ring_chunk_bytes;
      ThreadWorld world(o.threads, co);
      std::vector<std::vector<float>> bufs(static_cast<size_t>(o.threads));
      world.run([&](Communicator& c) {
        auto& buf = bufs[size_t(c.rank())];
        buf.assign(max_count, 0.0f);  // each thread faults in its own pages
        const std::vector<std::pair<std::string, Op>> variants = {
            {"native", [](Communicator& cc, std::span<float> d) { cc.allreduce(d); }},
            {"ring",
             [](Communicator& cc, std::span<float> d) {
               algo::ring_allreduce(cc, d.data(), d.size(), sum_f32());
             }},
        };
        for (size_t bytes : byte_sizes) {
          for (const auto& [name, op] : variants) {
            AllreduceBenchRow row = time_op(c, buf, bytes / sizeof(float), op, o);
            row.transport = "thread";
            row.algo = name;
            if (peer_busbw.count(bytes)) row.vs_peer = row.busbw_gbs / peer_busbw[bytes];
            if (c.rank() == 0) on_row(row);
          }
        }
      });
    }
  }
  if (mpi_world != nullptr) {
    // The other MPI ranks idle here (polling slowly) while rank 0 runs the thread transport.
    Communicator& c = mpi_world->local(0);
    const double saved = c.options().timeout_s;
    c.set_timeout(3600);
    c.barrier();
    c.set_timeout(saved);
  }
}

}  // namespace loom::measure
