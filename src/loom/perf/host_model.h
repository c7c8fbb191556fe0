// The step of a loom model on this machine's CPU cores, from rates `loom bench calibrate`
// measured here (calibration.h). The roofline of cost_model.h (FLOPs x a derating) is right
// for GPUs whose library kernels run near peak; on a CPU the step splits into parts whose
// speeds differ by 10x, so each part gets its own measured rate:
//   GEMMs        the step's GEMM FLOPs / the GEMM rate measured on the step's own shapes
//                (with as many concurrent workers and threads as the run uses);
//   elementwise  the layers between GEMMs (bias, ReLU, dropout, their backward, bias
//                gradients, softmax): their bytes moved / the rate of those ops measured at
//                the step's activation sizes (cache-resident, so not DRAM bandwidth);
//   update       the optimizer: momentum SGD reads w, g, v and writes w, v = 5 passes over
//                the parameters (20 bytes each) / the measured `a += b` DRAM rate, divided
//                among the ranks when the optimizer is sharded (ZeRO-1).
// Rates measured with all workers running at once already include their contention for
// memory bandwidth and cores; a rate for a (workers, threads) pair that was not measured
// falls back to the nearest smaller measured one.
#pragma once

#include <map>
#include <string>
#include <utility>

namespace loom::perf {

struct HostRates {
  int cores = 0;  // 0: no host calibration (the GPU roofline applies)
  // FLOP/s of one worker's GEMMs on the step's shapes, by (workers at once, threads each).
  std::map<std::pair<int, int>, double> gemm_flops;
  // Bytes/s of traffic per thread group, by total threads busy at once (aggregate).
  std::map<int, double> stream_bytes;       // a += b on buffers far beyond the caches
  std::map<int, double> elementwise_bytes;  // the layer ops at the step's activation sizes
  // The transport's allreduce as a training step meets it when the compute threads fill the
  // cores: timed among the workers' communication threads while their compute threads run
  // the step's GEMMs (alpha-beta fitted to two sizes; shown by `bench calibrate`), and
  // `steal`, the fraction of the compute threads' GEMM rate lost while it runs. By transport
  // (thread, mpi); empty: not measured.
  struct BusyLink {
    double alpha_s = 0, bytes_per_s = 0, steal = 0;
  };
  std::map<std::string, BusyLink> busy;
  // Set by whoever picks the link (validate.h) when the compute threads fill the cores:
  // with overlap, from the first bucket to the end of backward the compute runs `link_steal`
  // slower (the communication thread runs, or polls for its peer, beside it). <= 0: not
  // applied.
  double link_steal = -1;
  // Codec encode/decode GB/s (fp32 in) timed beside the workers' busy compute threads, as the
  // communication thread meets them (empty: not measured; the quiet `bench codec` figures).
  std::map<std::string, std::pair<double, double>> busy_codec_gbs;

  // Ranks that ran at once when each link measured here was timed, by catalog name
  // ("this-machine-<transport>", calibration.h). A transport between processes or threads of
  // one machine (shared memory, TCP over loopback, the thread transport) is moved by the CPU:
  // its rate holds only while every rank has its core, as when it was measured.
  std::map<std::string, int> link_ranks;

  // One message's time between ranks that share cores: a small allreduce timed with more ranks
  // than this machine's `cores` (a "shared_core_messages" calibration line), over its messages
  // in sequence. Each waits for its receiver to be given a core, which no link's own latency
  // carries; a run with more ranks than cores on this machine takes it as the alpha of every
  // link whose is smaller. 0: not measured.
  double shared_core_message_s = 0;

  bool valid() const { return cores > 0 && !gemm_flops.empty() && !stream_bytes.empty(); }
  // One worker's GEMM rate when `workers` workers of `threads` threads each run at once.
  double gemm_rate(int workers, int threads) const;
  // One worker's share of an aggregate rate when `workers` x `threads` threads run at once
  // (no more threads than cores can be busy; the aggregate is split evenly).
  double share(const std::map<int, double>& aggregate, int workers, int threads) const;
  // The share of its measured rate a link measured on this machine (link_ranks) keeps when
  // `ranks` ranks, one busy thread each, run on the cores at once: each rank gets
  // min(1, cores / ranks) of a core against min(1, cores / measured ranks) when measured, and
  // copies its bytes that much slower (4 ranks on 2 cores: half). 1 for other links.
  double link_share(const std::string& link, int ranks) const;
};

}  // namespace loom::perf
