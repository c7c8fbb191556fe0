#include "tiny_training.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "loom/comm/transport_registry.h"
#include "loom/comm/world.h"
#include "loom/core/rng.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/plan/comm_reader.h"
#include "loom/plan/model_reader.h"
#include "loom/plan/optim_reader.h"
#include "loom/plan/strategy_factory.h"
#include "loom/tensor/backend_registry.h"

namespace loom::sync::testing {
namespace {

constexpr int kFeatures = 20, kClasses = 10, kSamples = 4096;

struct Blobs {
  std::vector<float> x;
  std::vector<int32_t> y;
};

// Class c's samples scatter (sigma 1.5) around a random centre: separable but not trivially.
const Blobs& blobs() {
  static const Blobs b = [] {
    Blobs d;
    Rng rng(7, 0, RngPurpose::kTest);
    std::vector<float> centre(kClasses * kFeatures);
    for (auto& v : centre) v = 1.5f * rng.normal();
    for (int i = 0; i < kSamples; ++i) {
      const int c = int(rng.below(kClasses));
      d.y.push_back(c);
      for (int f = 0; f < kFeatures; ++f)
        d.x.push_back(centre[c * kFeatures + f] + 1.5f * rng.normal());
    }
    return d;
  }();
  return b;
}

}  // namespace

double TinyRun::mean_loss(size_t from, size_t to) const {
  double s = 0;
  for (size_t i = from; i < to; ++i) s += loss[i];
  return s / double(to - from);
}

Config tiny_config() {
  Config cfg;
  cfg.set_override("mlp.hidden=[32]");
  cfg.set("mlp.dropout", 0.0);
  cfg.set("optim.lr", 0.1);
  cfg.set("optim.momentum", 0.0);
  return cfg;
}

TinyRun run_tiny(const Config& cfg, int workers, int steps, int batch, const StrategyMaker& make) {
  const Blobs& data = blobs();
  comm::CommOptions opts = plan::read_comm_options(cfg);  // comm.algorithm and the like
  opts.timeout_s = 10;
  auto world = comm::create_world("thread", workers, opts);
  TinyRun run;
  std::vector<std::vector<double>> losses(static_cast<size_t>(workers),
                                          std::vector<double>(static_cast<size_t>(steps)));
  std::vector<std::vector<float>> finals(static_cast<size_t>(workers));
  std::mutex mu;
  world->run([&](comm::Communicator& c) {
    Backend& backend = cpu_backend();
    backend.set_intra_op_threads(1);
    auto model = nn::build_model(plan::read_model_spec(cfg), backend, {kFeatures}, kClasses);
    model->init_params(uint64_t(c.rank()) + 1);  // differ on purpose: start() must broadcast
    auto optimizer =
        optim::make_optimizer(plan::read_optimizer_options(cfg), backend, model->num_params());
    auto strategy =
        make ? make(c, *model, *optimizer) : plan::make_strategy(cfg, c, *model, *optimizer);
    strategy->start();
    const int64_t n = model->num_params();
    if (c.rank() == 0) {
      run.describe = strategy->describe();
      run.init_params.assign(model->params(), model->params() + n);
    }
    const int64_t global = int64_t(batch) * workers;
    std::vector<float> x(static_cast<size_t>(batch) * kFeatures);
    std::vector<int32_t> y(static_cast<size_t>(batch));
    for (int s = 0; s < steps; ++s) {
      for (int j = 0; j < batch; ++j) {
        const int64_t i = (s * global + int64_t(c.rank()) * batch + j) % kSamples;
        std::copy_n(data.x.begin() + i * kFeatures, kFeatures, x.begin() + j * kFeatures);
        y[size_t(j)] = data.y[size_t(i)];
      }
      nn::StepInfo info;
      strategy->begin_step(s, float(cfg.get_double("optim.lr", 0.1)));
      model->forward(x.data(), batch, info);
      const nn::LossResult r = model->loss(y.data(), strategy->grad_scale(batch));
      model->backward([&](const nn::ParamRange& range) { strategy->on_gradients_ready(range); });
      strategy->end_step();
      losses[size_t(c.rank())][size_t(s)] = r.loss_sum / batch;
    }
    strategy->finish();
    const SyncStats st = strategy->take_stats();
    std::lock_guard<std::mutex> lock(mu);
    finals[size_t(c.rank())].assign(model->params(), model->params() + n);
    if (c.rank() == 0) run.stats = st;
  });
  run.final_params = finals[0];
  for (const auto& f : finals) run.replicas_equal = run.replicas_equal && f == finals[0];
  run.loss.assign(size_t(steps), 0.0);
  for (const auto& l : losses)
    for (int s = 0; s < steps; ++s) run.loss[size_t(s)] += l[size_t(s)] / workers;
  return run;
}

}  // namespace loom::sync::testing
