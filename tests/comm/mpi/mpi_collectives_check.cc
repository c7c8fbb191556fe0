// The MPI transport's checks, run under mpirun for 1..4 ranks (registered in cmake/comm.cmake):
//   collectives (default): every collective and algorithm, counts including 0, 1 and odd sizes,
//                          against closed-form sums; exit 0 when all hold.
//   two-level: comm.algorithm = "two-level" over machines of 2 consecutive ranks (faked with
//              comm.ranks_per_node): allreduce (float, odd counts, every other reducer) against
//              closed-form sums and the flat ring's bits; exit 0 when all hold.
//   two-level-uneven: the same over 3 ranks (machines of 2 and 1): every rank must refuse at
//              the start naming the layout (stderr; exit 2).
//   collectives-no-room: the same where the shared window's backing directory is too small
//                        (mpi_small_shm_test.sh): every collective must go point to point.
//   silent <rank> <timeout_s>: <rank> sleeps; the others must fail naming it (stderr; exit 3).
//   loop <seconds> <pid_dir>: allreduce in a loop (for the kill -9 test); writes rank<R>.pid.
//   mismatch: rank r passes 1000 + r floats to allreduce; every rank must fail naming the
//             counts (stderr; exit 3).
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm_test_util.h"
#include "loom/comm/algorithms.h"
#include "loom/comm/transport_registry.h"
#include "loom/core/error.h"
#include "loom/core/timer.h"

using namespace loom::comm;
using loom::comm::testing::expected_sum;
using loom::comm::testing::input_value;
using loom::comm::testing::make_input;

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    if (++failures <= 20) std::fprintf(stderr, "FAIL %s\n", what.c_str());
  }
}

void check_collectives(Communicator& c, bool want_shared_memory) {
  const int n = c.size(), r = c.rank();
  const size_t counts[] = {0, 1, 2, 3, 7, 13, 100, 1001, 4099, 300001};
  for (size_t count : counts) {
    for (int path = 0; path < 4; ++path) {
      std::vector<float> v = make_input(r, count);
      const char* name[] = {"allreduce", "ring", "halving-doubling", "vendor"};
      if (path == 0) c.allreduce(std::span<float>(v));
      if (path == 1) algo::ring_allreduce(c, v.data(), count, sum_f32());
      if (path == 2) algo::halving_doubling_allreduce(c, v.data(), count, sum_f32());
      if (path == 3) vendor_allreduce(c, std::span<float>(v));
      bool ok = true;
      for (size_t i = 0; i < count; ++i) ok = ok && v[i] == expected_sum(n, i);
      expect(ok, fmt::format("{} n={} count={} rank={}", name[path], n, count, r));
    }
    {
      std::vector<float> v = make_input(r, count);
      c.reduce_scatter(std::span<float>(v));
      const BlockRange b = block_range(count, n, r);
      bool ok = true;
      for (size_t i = b.begin; i < b.end; ++i) ok = ok && v[i] == expected_sum(n, i);
      expect(ok, fmt::format("reduce_scatter n={} count={} rank={}", n, count, r));
    }
    {  // the point-to-point ring (c.reduce_scatter above may meet in shared memory)
      std::vector<float> v = make_input(r, count);
      algo::ring_reduce_scatter(c, v.data(), count, sum_f32());
      const BlockRange b = block_range(count, n, r);
      bool ok = true;
      for (size_t i = b.begin; i < b.end; ++i) ok = ok && v[i] == expected_sum(n, i);
      expect(ok, fmt::format("ring reduce_scatter n={} count={} rank={}", n, count, r));
    }
    for (int path = 0; path < 2; ++path) {
      std::vector<float> v(count, -1.0f);
      const BlockRange b = block_range(count, n, r);
      for (size_t i = b.begin; i < b.end; ++i) v[i] = input_value(r, i);
      if (path == 0) c.allgather(std::span<float>(v));
      if (path == 1) algo::ring_allgather(c, v.data(), count, sizeof(float));
      bool ok = true;
      for (int q = 0; q < n; ++q) {
        const BlockRange bq = block_range(count, n, q);
        for (size_t i = bq.begin; i < bq.end; ++i) ok = ok && v[i] == input_value(q, i);
      }
      expect(ok,
             fmt::format("{}allgather n={} count={} rank={}", path ? "ring " : "", n, count, r));
    }
    for (int root = 0; root < n; ++root) {
      std::vector<float> v = make_input(r, count);
      c.broadcast(std::span<float>(v), root);
      bool ok = true;
      for (size_t i = 0; i < count; ++i) ok = ok && v[i] == input_value(root, i);
      expect(ok, fmt::format("broadcast n={} count={} root={} rank={}", n, count, root, r));
    }
    c.barrier();
  }
  std::vector<int64_t> x = {int64_t(r), -int64_t(r)};
  c.allreduce(x.data(), x.size() * sizeof(int64_t), max_i64());
  expect(x[0] == n - 1 && x[1] == 0, "max_i64");
  // Every rank of these runs is on this machine: with more than one, the shared-memory
  // collectives must be the ones tested above, unless the run took the room away.
  // mpirun started every rank here: MPI_Comm_split_type finds one machine.
  expect(machine_layout(c.machine_of_rank(), n).machines() == 1, "all ranks on one machine");
  expect(mpi_node_shared_memory(c) == (n > 1 && want_shared_memory),
         want_shared_memory ? "the ranks meet in the node's shared memory"
                            : "no shared window without room for one");
}

void check_two_level(Communicator& c) {
  const int n = c.size(), r = c.rank();
  expect(c.machine_of_rank() == consecutive_machines(n, 2), "machines of 2 consecutive ranks");
  expect(c.allreduce_path(1 << 20) == Communicator::AllreducePath::kTwoLevel, "two-level chosen");
  for (size_t count :
       {size_t(0), size_t(1), size_t(3), size_t(7), size_t(1001), size_t(4099), size_t(300001)}) {
    std::vector<float> v = make_input(r, count), flat = make_input(r, count);
    c.allreduce(std::span<float>(v));
    algo::ring_allreduce(c, flat.data(), count, sum_f32());
    bool ok = v == flat;
    for (size_t i = 0; i < count; ++i) ok = ok && v[i] == expected_sum(n, i);
    expect(ok, fmt::format("two-level allreduce n={} count={} rank={}", n, count, r));
  }
  std::vector<int64_t> x = {int64_t(r), -int64_t(r)};
  c.allreduce(x.data(), x.size() * sizeof(int64_t), max_i64());
  expect(x[0] == n - 1 && x[1] == 0, "two-level max_i64");
  std::vector<double> d(33, 0.5 * r);
  c.allreduce(d.data(), d.size() * sizeof(double), sum_f64());
  expect(d[32] == 0.25 * n * (n - 1), "two-level sum_f64");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "collectives";
  CommOptions o;
  o.ring_chunk_bytes = 4096;  // several chunks per block at these sizes: pipelining runs
  o.small_message_bytes = 1024;
  if (mode == "silent" && argc > 3) o.timeout_s = std::atof(argv[3]);
  if (mode == "two-level" || mode == "two-level-uneven") {
    o.algorithm = AllreduceAlgorithm::kTwoLevel;
    o.ranks_per_node = 2;
  }
  try {
    auto world = create_world("mpi", 0, o);
    Communicator& c = world->local(0);
    if (mode == "collectives" || mode == "collectives-no-room") {
      check_collectives(c, mode == "collectives");
      std::vector<int64_t> f = {failures};
      c.allreduce(f.data(), sizeof(int64_t), sum_i64());
      if (c.rank() == 0)
        std::printf("%s: %d ranks, %lld failures\n", f[0] ? "FAIL" : "ok", c.size(),
                    (long long)f[0]);
      return f[0] == 0 ? 0 : 1;
    }
    if (mode == "two-level" || mode == "two-level-uneven") {
      check_two_level(c);
      std::vector<int64_t> f = {failures};
      c.allreduce(f.data(), sizeof(int64_t), sum_i64());
      if (c.rank() == 0)
        std::printf("%s: two-level, %d ranks, %lld failures\n", f[0] ? "FAIL" : "ok", c.size(),
                    (long long)f[0]);
      return f[0] == 0 ? 0 : 1;
    }
    if (mode == "silent") {
      const int silent = std::atoi(argv[2]);
      world->run([&](Communicator& cc) {
        if (cc.rank() == silent) {
          std::this_thread::sleep_for(std::chrono::seconds(20));
          return;
        }
        std::vector<float> v(100000, 1.0f);
        cc.allreduce(std::span<float>(v));
      });
      return 0;
    }
    if (mode == "mismatch") {
      std::vector<float> v(size_t(1000 + c.rank()), 1.0f);
      world->run([&](Communicator& cc) { cc.allreduce(std::span<float>(v)); });
      return 0;
    }
    if (mode == "loop") {
      const double seconds = std::atof(argv[2]);
      FILE* f = std::fopen(fmt::format("{}/rank{}.pid", argv[3], c.rank()).c_str(), "w");
      if (f) {
        std::fprintf(f, "%d\n", int(getpid()));
        std::fclose(f);
      }
      std::vector<float> v(1 << 16, 0.0f);
      loom::Stopwatch sw;
      world->run([&](Communicator& cc) {
        while (sw.seconds() < seconds) cc.allreduce(std::span<float>(v));
      });
      return 0;
    }
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "loom_comm_mpi_check: error: %s\n", e.what());
    return int(e.code());
  }
}
