// `loom scale --parallelism`: which of data, model and hybrid parallelism is faster for the
// model of --workload (a loom .toml, else the default MLP with --hidden) on --inter or
// --link-gbps (perf/parallelism_model.h).
#include <fmt/format.h>

#include "loom/cli/scale_command.h"
#include "loom/nn/graph/model_description.h"
#include "loom/perf/parallelism_model.h"
#include "loom/plan/model_reader.h"

namespace loom::cli::scale {
namespace {

// The zoo model of `cfg` on Fashion-MNIST's shapes (28x28 images, 10 classes), as the
// parallelism model takes it.
perf::ModelShape model_shape(const Config& cfg) {
  const nn::Shape input = {1, 28, 28};
  const int classes = 10;
  perf::ModelShape m;
  m.input = nn::numel(input);
  m.classes = classes;
  for (const nn::LayerDescription& l :
       nn::describe_layers(plan::read_model_spec(cfg), input, classes)) {
    perf::LayerShape s;
    s.kind = l.kind == "Linear" ? perf::LayerKind::kDense : perf::LayerKind::kOther;
    s.in = l.in;
    s.out = l.out;
    s.flops = double(l.flops);
    s.params = double(l.params);
    m.layers.push_back(s);
  }
  return m;
}

}  // namespace

void add_parallelism_options(CLI::App& cmd, ParallelismArgs& a) {
  cmd.add_flag("--parallelism", a.chosen,
               "data vs model vs hybrid parallelism for a loom model (--workload .toml or "
               "--hidden), workers = nodes x gpus-per-node");
  cmd.add_option("--hidden", a.hidden, "with --parallelism: mlp.hidden, e.g. 8192,8192");
  cmd.add_option("--link-gbps", a.link_gbps,
                 "with --parallelism: the workers' link in Gbit/s (instead of --inter)");
  cmd.add_option("--gflops", a.gflops, "with --parallelism: achieved GFLOP/s per worker");
}

void run_parallelism(const CommonArgs& common, const ParallelismArgs& a) {
  Config cfg = model_config(common.workload);
  if (!a.hidden.empty()) cfg.set_override("mlp.hidden=[" + a.hidden + "]");
  const perf::Catalog cat = common.catalog.load();
  perf::ParallelismSetup s;
  s.workers = common.nodes * common.gpus_per_node;
  s.batch = common.training.batch > 0 ? common.training.batch : 128;
  s.link = cat.link(common.inter);
  if (a.link_gbps > 0) {
    s.link.name = fmt::format("{} Gbit/s", a.link_gbps);
    s.link.gbs = a.link_gbps / 8;
    s.link.efficiency = 0.95;
  }
  s.flops_per_s = a.gflops > 0 ? a.gflops * 1e9
                               : cat.gpu(common.gpu).fp32_tflops * 1e12 *
                                     (common.derate > 0 ? common.derate : 0.5);
  const auto e = perf::compare_parallelism(model_shape(cfg), s);
  fmt::print("{}", common.json ? perf::parallelism_json(e, s) : perf::parallelism_table(e, s));
}

}  // namespace loom::cli::scale
