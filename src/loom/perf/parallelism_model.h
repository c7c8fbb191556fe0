// Data, model or hybrid parallelism for one sequential model on one link (docs/model_parallel.md):
// which is faster per step, and why (bytes on the link against FLOPs per worker).
//
// Per step, N workers, b samples each (global batch G = N b), P parameters:
//   data:   compute 3 F b; the gradient allreduce moves 2 (N-1)/N 4P bytes per worker,
//           overlapped with backward at best (exposed = max(0, comm - backward)).
//   model:  the model-parallel block (sync/model_parallel_block.h) on the gathered batch:
//           split dense layers cost F_l G / N = F_l b, replicated layers (convolutions,
//           the classifier) F_l G; exchanged per worker: the input gather (N-1) b w_in, the
//           loss-gradient gather (N-1) b C (fp32), per row-parallel layer an allreduce of
//           G w_out, per column-parallel layer that is not the first with parameters an
//           allreduce of G w_in; all on the critical path.
//   hybrid: layers before the first dense layer data-parallel on b samples (their gradient
//           allreduce after backward), the input gather + reduce-scatter of its gradient at the
//           block, the rest as in "model".
// Activations through int8 shrink their bytes to (1 + 4/512)/4 of fp32's and add encode and
// decode time at codec_gbs (fp32 GB/s). Compute: flops_per_s per worker; link: alpha-beta with
// 2 (N-1) messages per collective. Uses the builder's automatic layout (column/row pairs, a
// last unpaired dense layer replicated).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/perf/catalog.h"

namespace loom::perf {

enum class LayerKind {
  kDense,  // fully connected: split across the workers by the model-parallel block
  kOther,  // convolutions, pooling, activations, reshapes: replicated in the block
};

// One layer of a sequential model, per sample.
struct LayerShape {
  LayerKind kind = LayerKind::kOther;
  int64_t in = 0, out = 0;  // input and output widths (elements)
  double flops = 0;         // forward
  double params = 0;
};

// The workload: a sequential model's layers in forward order, with its input and output widths.
struct ModelShape {
  int64_t input = 0;    // elements per sample
  int64_t classes = 0;  // width of the logits
  std::vector<LayerShape> layers;
};

struct ParallelismSetup {
  int workers = 2;
  int64_t batch = 128;        // per worker
  double flops_per_s = 1e11;  // achieved per worker
  LinkSpec link;              // between workers
  double codec_gbs = 2.0;     // int8 encode + decode throughput, fp32 GB/s
};

struct ParallelismEstimate {
  std::string mode;         // data | model | hybrid
  std::string activations;  // fp32 | int8 ("-" for data)
  double compute_s = 0, comm_s = 0, exposed_s = 0, codec_s = 0, step_s = 0;
  double bytes_per_step = 0;  // sent per worker
  double samples_per_s = 0;
};

// Every mode that applies to `model` (hybrid only for models with layers with parameters
// before the first dense layer), fastest first.
std::vector<ParallelismEstimate> compare_parallelism(const ModelShape& model,
                                                     const ParallelismSetup& s);

std::string parallelism_table(const std::vector<ParallelismEstimate>& e, const ParallelismSetup& s);
std::string parallelism_json(const std::vector<ParallelismEstimate>& e, const ParallelismSetup& s);

}  // namespace loom::perf
