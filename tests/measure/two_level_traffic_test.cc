// The performance model's two-level allreduce (perf/collective_model.h, two_level_link_bytes)
// against what loom's comm::algo::two_level_allreduce sends: each rank's bytes to ranks of its
// own machine and to other machines, counted on a thread world with faked machines.
#include <gtest/gtest.h>

#include "comm/counting.h"
#include "loom/comm/algorithms.h"
#include "loom/comm/thread/thread_world.h"
#include "loom/perf/collective_model.h"

namespace loom {
namespace {

TEST(TwoLevelTraffic, TheModelsBytesPerStageAreWhatTheAlgorithmSends) {
  for (const auto& [machines, per] : {std::pair{2, 2}, std::pair{2, 3}, std::pair{3, 2},
                                      std::pair{2, 4}, std::pair{4, 1}, std::pair{1, 4}}) {
    const int n = machines * per;
    const size_t count = size_t(n) * 2500;
    const std::vector<int> machine_of = comm::consecutive_machines(n, per);
    std::vector<std::vector<int64_t>> sent(static_cast<size_t>(n),
                                           std::vector<int64_t>(size_t(n), 0));
    comm::CommOptions o;
    o.ring_chunk_bytes = 4096;
    o.small_message_bytes = 0;  // the ring across machines, as the model has it
    comm::ThreadWorld world(n, o);
    world.run([&](comm::Communicator& c) {
      comm::testing::Counting counting(c, sent[size_t(c.rank())]);
      std::vector<float> v(count, 1.0f);
      comm::algo::two_level_allreduce(counting, machine_of, v.data(), count, comm::sum_f32());
    });
    perf::Topology t;
    t.nodes = machines;
    t.gpus_per_node = per;
    const perf::LinkBytes model = perf::two_level_link_bytes(t, double(count * sizeof(float)));
    for (int r = 0; r < n; ++r) {
      double inside = 0, across = 0;
      for (int q = 0; q < n; ++q)
        (machine_of[size_t(q)] == machine_of[size_t(r)] ? inside : across) +=
            double(sent[size_t(r)][size_t(q)]);
      EXPECT_DOUBLE_EQ(inside, model.intra) << machines << " x " << per << " rank " << r;
      EXPECT_DOUBLE_EQ(across, model.inter) << machines << " x " << per << " rank " << r;
    }
  }
}

}  // namespace
}  // namespace loom
