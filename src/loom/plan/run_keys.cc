#include "loom/plan/run_keys.h"

#include <fmt/format.h>

#include "loom/comm/transport_registry.h"
#include "loom/core/trace.h"
#include "loom/data/loader/pipeline_config.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/optim/loss_scaler.h"
#include "loom/optim/lr_schedule.h"
#include "loom/optim/optimizer.h"
#include "loom/plan/auto_reader.h"
#include "loom/plan/strategy_factory.h"
#include "loom/plan/train_settings.h"
#include "loom/sync/strategy.h"

namespace loom::plan {

namespace {

// The `transport` key's help, from the transports' records.
std::string transport_help() {
  std::string text;
  for (const comm::TransportKind& k : comm::transport_kinds())
    text += fmt::format("\"{}\" ({}), ", k.name, k.summary);
  return text + "or \"auto\" (mpi when launched by mpirun)";
}

std::vector<ConfigKeySpec> own_keys() {
  return {
      {"workers", ConfigType::kInt, "1", "data-parallel workers (threads, or MPI ranks)"},
      {"threads", ConfigType::kInt, "1", "intra-op threads per worker (GEMM)"},
      {"batch", ConfigType::kInt, "128",
       "samples per worker per step (per micro-batch with train.accumulate)"},
      {"epochs", ConfigType::kInt, "3", "passes over the training set"},
      {"max_steps", ConfigType::kInt, "0", "stop after this many steps (0 = no limit)"},
      {"seed", ConfigType::kInt, "0", "seed of every random stream"},
      {"transport", ConfigType::kString, "\"auto\"", transport_help()},
      {"backend", ConfigType::kString, "\"cpu\"",
       "compute backend: cpu, or cuda (with transport = \"nccl\")"},
      {"precision", ConfigType::kString, "\"fp32\"",
       "inputs of the Linear and Conv2d matrix products: fp32, bf16 (CPU with AVX512_BF16; "
       "fp32 accumulation, weights, gradients, optimizer and loss), fp16 (backend = \"cuda\")"},
      {"eval", ConfigType::kBool, "true",
       "validation figures after each epoch (with data.validation) and the test set once at "
       "the end"},
      {"progress", ConfigType::kString, "\"auto\"",
       "\"bar\", \"lines\", \"none\" or \"auto\" (bar on a terminal)"},
      {"output.dir", ConfigType::kString, "\"runs/latest\"",
       "where metrics.jsonl, summary.json, model.safetensors, config.toml and tb/ (TensorBoard: "
       "tensorboard --logdir runs/) go (\"\" = nowhere); "
       "one that holds a "
       "run is refused (loom train --force replaces it); \"{n}\" in it takes the next free "
       "number"},
      {"train.accumulate", ConfigType::kInt, "1",
       "micro-batches of `batch` samples per step (>= 1): k runs k forward/backward passes "
       "and one synchronisation, like one step of k x batch"},
      {"train.keep_best", ConfigType::kBool, "false",
       "keep the weights of the epoch with the best validation accuracy (needs "
       "data.validation); summary.json names the epoch"},
      {"train.log_every", ConfigType::kInt, "50",
       "a \"step\" line in metrics.jsonl every this many steps (0 = epoch lines only)"},
      {"train.histograms", ConfigType::kBool, "false",
       "histograms of every weight tensor and its gradient in output.dir/tb/ (TensorBoard), "
       "every train.histogram_every steps"},
      {"train.histogram_every", ConfigType::kInt, "100",
       "steps between the histograms of train.histograms (>= 1)"},
      {"log.level", ConfigType::kString, "\"info\"", "debug, info, warn, error, quiet"},
      {"data.dir", ConfigType::kString, "\"/usr/share/datasets/fashion-mnist\"",
       "directory of the Fashion-MNIST IDX files"},
      {"data.prefetch", ConfigType::kInt, "2", "batches read ahead (0 = synchronous)"},
      {"data.shuffle", ConfigType::kBool, "true", "shuffle by (seed, epoch)"},
      {"comm.timeout_s", ConfigType::kDouble, "30",
       "seconds before a silent peer is declared lost"},
      {"comm.ring_chunk_kib", ConfigType::kInt, "512", "pipelining unit of ring collectives"},
      {"comm.small_kib", ConfigType::kInt, "64", "below this, halving-doubling allreduce"},
      {"comm.node_shm", ConfigType::kBool, "true",
       "MPI ranks all on one machine: float collectives <= 16 MiB through shared memory"},
  };
}

}  // namespace

std::vector<ConfigKeySpec> train_config_keys() {
  std::vector<ConfigKeySpec> keys = own_keys();
  for (auto part :
       {nn::model_config_keys(), optim::optimizer_config_keys(), optim::lr_schedule_config_keys(),
        optim::loss_scaler_config_keys(), sync_config_keys(), trace::trace_config_keys(),
        checkpoint_config_keys(), data::data_config_keys(), auto_config_keys()})
    keys.insert(keys.end(), part.begin(), part.end());
  return keys;
}

std::string config_help() {
  std::string out;
  for (const auto& k : train_config_keys())
    out += fmt::format("  {:<22} {:<38} {}\n", k.key, k.default_text, k.doc);
  return out;
}

}  // namespace loom::plan
