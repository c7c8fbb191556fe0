#include "loom/perf/host_model.h"

#include <gtest/gtest.h>

#include <string>

#include "loom/core/error.h"
#include "loom/perf/calibration.h"
#include "loom/perf/cost_model.h"
#include "loom/perf/workload.h"

namespace loom::perf {
namespace {

TEST(HostModel, AHostLinkKeepsItsRateOnlyWhileEveryRankHasItsCore) {
  HostRates h;
  h.cores = 2;
  h.link_ranks["this-machine-mpi"] = 2;
  h.link_ranks["this-machine-big"] = 4;
  // Measured by 2 ranks on 2 cores: each had a core.
  EXPECT_DOUBLE_EQ(h.link_share("this-machine-mpi", 1), 1.0);
  EXPECT_DOUBLE_EQ(h.link_share("this-machine-mpi", 2), 1.0);
  EXPECT_DOUBLE_EQ(h.link_share("this-machine-mpi", 4), 0.5);
  EXPECT_DOUBLE_EQ(h.link_share("this-machine-mpi", 8), 0.25);
  // Measured by 4 ranks on 2 cores: already at half a core each.
  EXPECT_DOUBLE_EQ(h.link_share("this-machine-big", 4), 1.0);
  EXPECT_DOUBLE_EQ(h.link_share("this-machine-big", 2), 2.0);
  // A link not measured on this CPU (a wire between machines) is not shared.
  EXPECT_DOUBLE_EQ(h.link_share("100gbe", 4), 1.0);
  h.cores = 0;
  EXPECT_DOUBLE_EQ(h.link_share("this-machine-mpi", 4), 1.0);
}

// Lines `loom bench calibrate` wrote on the 2-core Zen 5 machine (AMD EPYC family 26 model 2),
// with the ring rows `loom bench allreduce --transport mpi` timed between 2 MPI ranks of one
// network namespace over Open MPI's TCP (what the two-level stages inside a machine run on
// bench/netns/two_level.sh's bed), relabelled transport "mpi-p2p" as that script does.
constexpr const char* kRecorded = R"({"bench":"host","cores":2,"format_version":2}
{"batch":128,"bench":"gemm","format_version":2,"gflops":202.06,"threads":1,"widths":[784,1024,1024,10],"workers":1}
{"batch":128,"bench":"gemm","format_version":2,"gflops":54.25,"threads":1,"widths":[784,1024,1024,10],"workers":2}
{"bench":"membw","bytes":67108864,"format_version":2,"gbs":57.54,"op":"add","threads":1}
{"bench":"membw","bytes":67108864,"format_version":2,"gbs":38.24,"op":"add","threads":2}
{"batch":128,"bench":"elementwise","format_version":2,"gbs":59.30,"threads":1,"widths":[784,1024,1024,10]}
{"batch":128,"bench":"elementwise","format_version":2,"gbs":119.39,"threads":2,"widths":[784,1024,1024,10]}
{"algo":"ring","bench":"allreduce","bytes":1048576,"format_version":2,"lat_us":1154.0,"ranks":2,"transport":"mpi-p2p"}
{"algo":"ring","bench":"allreduce","bytes":4194304,"format_version":2,"lat_us":2703.0,"ranks":2,"transport":"mpi-p2p"}
{"algo":"ring","bench":"allreduce","bytes":16777216,"format_version":2,"lat_us":10800.0,"ranks":2,"transport":"mpi-p2p"}
)";

struct Predicted {
  StepEstimate est;
  double alpha_intra = 0, rate_intra = 0;  // the fitted link, as measured
};

// The default MLP, M machines x K ranks of this CPU (all on this one machine, as network
// namespaces, or each its own), one bucket per step, two-level; the link between machines a
// wire of 0.1 GB/s and 100 us.
Predicted two_level(int nodes, int per_node, const std::string& calibration, bool one_host) {
  const Calibration cal = parse_calibration(calibration, "recorded.jsonl");
  Catalog cat = Catalog::builtin();
  Derating d;
  cal.apply(cat, d);
  // The default MLP's Linear layers (784-1024-1024-10): parameters and forward FLOPs.
  Workload w;
  w.name = "mlp";
  w.layers = {{"fc1", 784 * 1024 + 1024, 2.0 * 784 * 1024},
              {"fc2", 1024 * 1024 + 1024, 2.0 * 1024 * 1024},
              {"fc3", 1024 * 10 + 10, 2.0 * 1024 * 10}};
  w.elementwise_bytes = 1e5;
  Cluster c;
  c.gpu = cat.gpu("this-machine");
  c.topo.nodes = nodes;
  c.topo.gpus_per_node = per_node;
  c.topo.intra = cat.link("this-machine-mpi-p2p");
  c.topo.inter = {"wire", "ethernet", 0.1, 100, 1.0, "test"};
  c.topo.nodes_share_host = one_host;
  c.storage = {"disk", 1e6, "test"};
  SyncSpec s;
  s.algorithm = "two-level";
  s.bucket_mb = 1e3;
  s.overlap = false;
  TrainSpec t;
  t.batch = 128;
  t.optimizer = "momentum";
  Predicted p;
  p.est = CostModel(w, c, s, t, d).estimate();
  p.alpha_intra = c.topo.intra.alpha_s();
  p.rate_intra = c.topo.intra.bytes_per_s();
  return p;
}

TEST(HostModel, TwoLevelStagesInsideAMachineShareItsCores) {
  const double P = (784 * 1024 + 1024) + (1024 * 1024 + 1024) + (1024 * 10 + 10);
  const double S = 4 * P;
  // 2 machines x 2 ranks on the 2 cores (the network-namespace bed): each rank copies at half
  // the rate the 2 ranks measured alone. By hand (collective_model.h, two-level): inside,
  // reduce-scatter + allgather 2(K-1) alphas and 2(K-1)/K S at half the rate; across, 2(M-1)
  // alphas and 2(M-1)/M S/K per rank, K flows sharing the 0.1 GB/s wire.
  const Predicted p = two_level(2, 2, kRecorded, true);
  ASSERT_GT(p.rate_intra, 0);
  const double intra = 2 * p.alpha_intra + S / (p.rate_intra * 0.5);
  const double inter = 2 * 100e-6 + (S / 2) / (0.1e9 / 2);
  EXPECT_NEAR(p.est.comm_s, intra + inter, 1e-9);
  // A model that let 4 ranks copy at 2 ranks' rate would be short by S / rate.
  const double ignoring = 2 * p.alpha_intra + S / p.rate_intra + inter;
  EXPECT_GT(p.est.comm_s - ignoring, 0.9 * S / p.rate_intra);

  // One machine of 2 ranks: as measured.
  const Predicted one = two_level(1, 2, kRecorded, true);
  EXPECT_NEAR(one.est.comm_s, 2 * one.alpha_intra + S / one.rate_intra, 1e-9);
  // Two machines of 2 ranks each, each with its own 2 cores: the stages inside run as measured.
  const Predicted apart = two_level(2, 2, kRecorded, false);
  EXPECT_NEAR(apart.est.comm_s, 2 * apart.alpha_intra + S / apart.rate_intra + inter, 1e-9);
  // ... and their compute is that of 2 ranks on one machine, while on one host it is that of
  // 4 ranks on one machine.
  EXPECT_DOUBLE_EQ(apart.est.compute_s(), one.est.compute_s());
  EXPECT_DOUBLE_EQ(p.est.compute_s(), two_level(1, 4, kRecorded, true).est.compute_s());
  EXPECT_NE(p.est.compute_s(), one.est.compute_s());

  // The same rows timed by 4 ranks at once: already at the run's share.
  std::string four = kRecorded;
  for (size_t at = four.find("\"ranks\":2"); at != std::string::npos;
       at = four.find("\"ranks\":2", at))
    four.replace(at, 9, "\"ranks\":4");
  const Predicted p4 = two_level(2, 2, four, true);
  EXPECT_NEAR(p4.est.comm_s, 2 * p4.alpha_intra + S / p4.rate_intra + inter, 1e-9);
}

TEST(HostModel, MessagesBetweenRanksThatShareCoresWaitForACore) {
  // bench/netns/two_level.sh's line: loom's ring of 32 B among 4 ranks on the 2 cores, 6
  // messages in 3.19 ms (timed twice; the faster is kept).
  const std::string shared =
      std::string(kRecorded) +
      R"({"bench":"shared_core_messages","ranks":4,"messages":6,"time_us":3500,"format_version":2}
{"bench":"shared_core_messages","ranks":4,"messages":6,"time_us":3190,"format_version":2}
)";
  const Calibration cal = parse_calibration(shared, "recorded.jsonl");
  EXPECT_DOUBLE_EQ(cal.host.shared_core_message_s, 3190e-6 / 6);
  const double wait = 3190e-6 / 6;
  // 4 ranks on 2 cores: both links' alphas become the wait (the wire's 100 us and the
  // fitted intra alpha are smaller), on each of the 2(K-1) + 2(M-1) messages in sequence.
  const Predicted p = two_level(2, 2, shared, true);
  const Predicted before = two_level(2, 2, kRecorded, true);
  ASSERT_LT(before.alpha_intra, wait);
  EXPECT_NEAR(p.est.comm_s - before.est.comm_s,
              2 * (wait - before.alpha_intra) + 2 * (wait - 100e-6), 1e-9);
  // Each machine's 2 ranks on its own 2 cores: no wait, the run as without the line.
  EXPECT_NEAR(two_level(2, 2, shared, false).est.comm_s,
              two_level(2, 2, kRecorded, false).est.comm_s, 1e-12);

  for (
      const char* bad :
      {R"({"bench":"shared_core_messages","ranks":1,"messages":6,"time_us":9,"format_version":2})",
       R"({"bench":"shared_core_messages","ranks":4,"time_us":9,"format_version":2})",
       R"({"bench":"shared_core_messages","ranks":4,"messages":6,"time_us":-1,"format_version":2})"}) {
    EXPECT_THROW(parse_calibration(bad, "bad.jsonl"), InputError) << bad;
  }
}

TEST(HostModel, OversubscribedComputeRunsAtTheCoresShare) {
  // 4 ranks x 1 thread on 2 cores, measured only up to 2 workers: one worker's GEMM rate
  // halved; 2 ranks use the rate measured with 2 at once.
  const Calibration cal = parse_calibration(kRecorded, "recorded.jsonl");
  EXPECT_DOUBLE_EQ(cal.host.gemm_rate(4, 1), 202.06e9 / 2);
  EXPECT_DOUBLE_EQ(cal.host.gemm_rate(2, 1), 54.25e9);
}

}  // namespace
}  // namespace loom::perf
