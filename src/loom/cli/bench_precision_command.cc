// `loom bench precision`: what bf16 matrix products buy on this CPU, in one run at one thread.
// For the default MLP (configs/mlp.toml) and ResNet-20 (configs/resnet20.toml): training
// samples/s in fp32 and in bf16 (interleaved rounds, the best of each), the same step's
// matrix products alone (each Linear's three GEMMs and each Conv2d's forward and backward at
// the step's shapes) timed in both precisions, and the ratio of the two speed-ups: how much of
// the kernels' gain the whole step keeps. With --accuracy, also the default MLP's test accuracy
// after its full run (3 epochs, 2 workers as the default job) in both precisions.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loom/cli/commands.h"
#include "loom/config.h"
#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/measure/bench_harness.h"
#include "loom/measure/machine_identity.h"
#include "loom/nn/graph/graph_builder.h"
#include "loom/nn/graph/model.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/nn/layers/conv2d.h"
#include "loom/nn/layers/linear.h"
#include "loom/plan/batch_reader.h"
#include "loom/plan/model_reader.h"
#include "loom/tensor/backend_registry.h"
#include "loom/tensor/cpu/onednn_conv.h"
#include "loom/tensor/cpu/onednn_matmul.h"
#include "loom/train/trainer.h"

namespace loom::cli::bench_precision_command {
namespace {

struct Args {
  std::string configs = "configs";  // from the repository root
  int64_t mlp_steps = 300, resnet_steps = 20;
  int rounds = 3;
  bool accuracy = false;
  std::string json_path;
};

// The step's matrix products of a model: buffers for each, and one pass over them all.
class StepProducts {
 public:
  StepProducts(const Config& cfg, int64_t batch) {
    const nn::Shape sample{1, 28, 28};  // Fashion-MNIST
    const nn::GraphSpec graph = nn::model_graph(plan::read_model_spec(cfg), sample, 10);
    nn::Model model(cpu_backend(), sample, 10, nn::build_nodes(graph, sample));
    // The model asks no input gradient of a layer that no layer with parameters feeds (its
    // first in a chain); counted the same way here.
    bool params_below = false;
    for (size_t i = 0; i < model.layers().size(); ++i) {
      const nn::Layer* layer = model.layers()[i].get();
      const bool dx = params_below;
      params_below = params_below || layer->num_params() > 0;
      const std::vector<int>& in = model.layer_inputs(int(i));
      const nn::Shape in_shape = in.empty() || in[0] < 0 ? sample : model.output_shape(in[0]);
      if (const auto* l = dynamic_cast<const nn::Linear*>(layer)) {
        linears_.push_back({batch, l->in_features(), l->out_features(), dx});
      } else if (const auto* c = dynamic_cast<const nn::Conv2d*>(layer)) {
        const nn::Conv2dOptions& o = c->options();
        ConvGeometry g;
        g.batch = batch, g.in_c = in_shape.at(0), g.in_h = in_shape.at(1), g.in_w = in_shape.at(2);
        g.out_c = o.out_channels, g.kernel_h = o.kernel_h, g.kernel_w = o.kernel_w;
        g.stride_h = o.stride_h, g.stride_w = o.stride_w, g.pad_h = o.pad_h, g.pad_w = o.pad_w;
        g.dilation_h = o.dilation_h, g.dilation_w = o.dilation_w, g.groups = o.groups;
        g.out_h = (g.in_h + 2 * g.pad_h - g.dilation_h * (g.kernel_h - 1) - 1) / g.stride_h + 1;
        g.out_w = (g.in_w + 2 * g.pad_w - g.dilation_w * (g.kernel_w - 1) - 1) / g.stride_w + 1;
        convs_.push_back({g, o.bias, dx});
      }
    }
    int64_t most = 0;
    for (const auto& l : linears_)
      most = std::max({most, l.batch * l.in, l.batch * l.out, l.in * l.out});
    for (const auto& [g, bias, dx] : convs_)
      most =
          std::max({most, g.batch * g.in_c * g.in_h * g.in_w, g.batch * g.out_c * g.out_h * g.out_w,
                    g.out_c * g.in_c / g.groups * g.kernel_h * g.kernel_w});
    for (auto* v : {&a_, &b_, &c_, &d_, &e_, &f_}) v->assign(size_t(most), 0.01f);
  }

  // One pass: every product of forward and backward once.
  void pass(Precision p) {
    for (const auto& l : linears_) {
      cpu::onednn_matmul(false, true, l.batch, l.out, l.in, 1.0f, a_.data(), l.in, b_.data(), l.in,
                         0.0f, c_.data(), l.out, p);
      cpu::onednn_matmul(true, false, l.out, l.in, l.batch, 1.0f, c_.data(), l.out, a_.data(), l.in,
                         0.0f, d_.data(), l.in, p);
      if (l.dx)
        cpu::onednn_matmul(false, false, l.batch, l.in, l.out, 1.0f, c_.data(), l.out, b_.data(),
                           l.in, 0.0f, e_.data(), l.in, p);
    }
    for (const auto& [g, bias, dx] : convs_) {
      cpu::onednn_conv_forward_training(g, a_.data(), b_.data(), bias ? d_.data() : nullptr,
                                        c_.data(), p);
      cpu::onednn_conv_backward(g, a_.data(), b_.data(), c_.data(), dx ? e_.data() : nullptr,
                                d_.data(), bias ? f_.data() : nullptr, p);
    }
  }

  // The median seconds of `repeats` passes after a warm-up pass.
  double seconds(Precision p, int repeats) {
    measure::RepeatOptions o;
    o.reps = repeats;
    return measure::time_repeats([&] { pass(p); }, o).seconds;
  }

  size_t linears() const { return linears_.size(); }
  size_t convs() const { return convs_.size(); }

 private:
  struct Gemm {
    int64_t batch, in, out;
    bool dx;
  };
  struct Conv {
    ConvGeometry g;
    bool bias, dx;
  };
  std::vector<Gemm> linears_;
  std::vector<Conv> convs_;
  std::vector<float> a_, b_, c_, d_, e_, f_;
};

struct Figures {
  double sps[2] = {0, 0};   // training samples/s, fp32 and bf16 (best of the rounds)
  double gemm[2] = {0, 0};  // seconds of the step's products alone
};

Config quiet(const std::string& path, int64_t steps, const std::string& precision) {
  Config cfg = Config::from_file(path);
  cfg.set("workers", int64_t(1));
  cfg.set("threads", int64_t(1));
  cfg.set("max_steps", steps);
  cfg.set("eval", false);
  cfg.set("progress", std::string("none"));
  cfg.set("log.level", std::string("warn"));
  cfg.set("output.dir", std::string(""));
  cfg.set("precision", precision);
  return cfg;
}

Figures measure(const std::string& name, const std::string& path, int64_t steps, int rounds,
                measure::BenchOutput& out) {
  Figures f;
  const Config base = Config::from_file(path);
  const int64_t batch = plan::read_batch(base);
  cpu_backend().set_intra_op_threads(1);
  StepProducts products(base, batch);
  const char* names[2] = {"fp32", "bf16"};
  const Precision precisions[2] = {Precision::kFp32, Precision::kBf16};
  // Training runs and the products alone take turns, round by round, and each figure is the
  // best of its rounds: the machine's speed drifts, and the two figures of a ratio should see
  // the same spells.
  for (int k = 0; k < 2; ++k) f.gemm[k] = 1e30;
  const measure::BestOfRounds best = measure::best_of_rounds(2, rounds, [&](int k, int round) {
    const train::TrainResult r =
        train::run_training(plan::read_run_plan(quiet(path, steps, names[k])));
    cpu_backend().set_intra_op_threads(1);
    const double alone = products.seconds(precisions[k], 9);
    f.gemm[k] = std::min(f.gemm[k], alone);
    out.line(fmt::format("  {} round {} {}: {:.1f} samples/s, products alone {:.2f} ms", name,
                         round + 1, names[k], r.samples_per_s, 1e3 * alone));
    return r.samples_per_s;
  });
  for (int k = 0; k < 2; ++k) f.sps[k] = best.best[size_t(k)];
  const double train_ratio = f.sps[1] / f.sps[0], gemm_ratio = f.gemm[0] / f.gemm[1];
  out.line(fmt::format(
      "{}: training {:.1f} -> {:.1f} samples/s (bf16/fp32 {:.2f}); the step's {} GEMM "
      "layers and {} convolutions alone {:.2f} -> {:.2f} ms (bf16/fp32 speed {:.2f}); ratio of "
      "ratios {:.2f}",
      name, f.sps[0], f.sps[1], train_ratio, products.linears(), products.convs(), 1e3 * f.gemm[0],
      1e3 * f.gemm[1], gemm_ratio, train_ratio / gemm_ratio));
  const nlohmann::json j = {{"bench", "precision"},
                            {"model", name},
                            {"fp32_samples_per_s", f.sps[0]},
                            {"bf16_samples_per_s", f.sps[1]},
                            {"train_ratio", train_ratio},
                            {"fp32_products_s", f.gemm[0]},
                            {"bf16_products_s", f.gemm[1]},
                            {"products_ratio", gemm_ratio},
                            {"ratio_of_ratios", train_ratio / gemm_ratio}};
  out.json(j);
  return f;
}

void run(const Args& a) {
  const std::string why = cpu_backend().matmul_precision_unsupported(Precision::kBf16);
  if (!why.empty()) throw ConfigError(fmt::format("loom bench precision: bf16: {}", why));
  measure::BenchOutput out(true, a.json_path);
  out.line(fmt::format("loom bench precision on {}: 1 thread, fp32 against bf16 matrix products",
                       measure::cpu_model()));
  measure("MLP", a.configs + "/mlp.toml", a.mlp_steps, a.rounds, out);
  measure("ResNet-20", a.configs + "/resnet20.toml", a.resnet_steps, a.rounds, out);
  if (!a.accuracy) return;
  double acc[2] = {0, 0};
  const char* names[2] = {"fp32", "bf16"};
  for (int k = 0; k < 2; ++k) {
    Config cfg = Config::from_file(a.configs + "/mlp.toml");
    cfg.set("workers", int64_t(2));  // the default job
    cfg.set("progress", std::string("none"));
    cfg.set("log.level", std::string("warn"));
    cfg.set("output.dir", std::string(""));
    cfg.set("precision", std::string(names[k]));
    acc[k] = train::run_training(plan::read_run_plan(cfg)).test_acc;
  }
  out.line(fmt::format(
      "MLP test accuracy after its full run (2 workers): fp32 {:.4f}, bf16 {:.4f} ({:+.2f} "
      "points)",
      acc[0], acc[1], 100 * (acc[1] - acc[0])));
  const nlohmann::json j = {{"bench", "precision"},
                            {"model", "MLP"},
                            {"fp32_test_acc", acc[0]},
                            {"bf16_test_acc", acc[1]}};
  out.json(j);
}

CommandRegistrar reg("bench precision", [](CLI::App& bench) {
  auto a = std::make_shared<Args>();
  CLI::App* cmd = bench.add_subcommand(
      "precision", "bf16 against fp32 matrix products: training and kernel speed, accuracy");
  cmd->add_option("--configs", a->configs, "folder holding mlp.toml and resnet20.toml");
  cmd->add_option("--mlp-steps", a->mlp_steps, "training steps of each MLP run")
      ->check(CLI::Range(10, 1000000));
  cmd->add_option("--resnet-steps", a->resnet_steps, "training steps of each ResNet-20 run")
      ->check(CLI::Range(5, 1000000));
  cmd->add_option("--rounds", a->rounds, "interleaved fp32/bf16 rounds; the best of each counts")
      ->check(CLI::Range(1, 100));
  cmd->add_flag("--accuracy", a->accuracy,
                "also train the default MLP fully in both precisions and compare test accuracy");
  cmd->add_option("--json", a->json_path, "also write the JSON lines to this file");
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace loom::cli::bench_precision_command
