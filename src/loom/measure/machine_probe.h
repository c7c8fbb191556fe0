// `loom bench calibrate`: measures this machine's rates for the performance model and hands
// them out as JSON objects in the format calibration.h reads back:
//   gemm         one worker's FLOP/s on the step's GEMM shapes (tensor/cpu/gemm_probe.h),
//                1 worker x 1 thread, 1 x 2 threads, 2 workers x 1 thread at once
//   membw        a += b and memcpy on 64 MiB buffers, 1 and 2 threads (bytes read + written/s)
//   elementwise  the step's layer ops between GEMMs (bias, ReLU, dropout, their backward,
//                bias gradients, softmax) on the step's shapes, 1 and 2 threads at once
//   allreduce    latency by size, thread transport (and MPI when launched by mpirun)
//   codec        encode/decode GB/s of the codecs on the model's gradient size
//   loader       samples/s the prefetching loader delivers with nobody computing
//   host         cores
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loom/perf/calibration_lines.h"
#include "loom/perf/host_model.h"

namespace loom::comm {
class World;
}

namespace loom::measure {

struct ProbeOptions {
  std::vector<int64_t> widths = {784, 1024, 1024, 10};  // the MLP (input first)
  int64_t batch = 128;                                  // per worker
  double dropout = 0.5;
  std::vector<std::string> codecs = {"fp16", "int8", "onebit"};
  std::string data_dir;            // Fashion-MNIST for the loader rate ("" = loom's default)
  bool quick = false;              // fewer repetitions (tests, a first look)
  int64_t bucket_bytes = 4 << 20;  // the run's gradient bucket (sync.bucket_kib)
};

// The compute rates of one run shape only (GEMM with `workers` x `threads`, a += b and the
// elementwise ops with workers x threads threads busy), measured quickly: `loom scale
// --validate` takes them right before and after each run, because on a shared machine the
// rates follow the other tenants' load from one second to the next.
// With a codec other than fp32 and more than one worker, the codec's speed beside busy
// compute threads too.
perf::HostRates probe_run_rates(const ProbeOptions& o, int workers, int threads,
                                const std::string& codec = "fp32");

// Runs every measurement and calls `emit` with each result line as soon as it is known.
// `mpi` may be null; under MPI every rank must call this (the allreduce needs all of them)
// and only rank 0 emits and measures the rest.
void probe_machine(const ProbeOptions& o, comm::World* mpi,
                   const std::function<void(const nlohmann::json&)>& emit);

}  // namespace loom::measure
