// What a gradient codec does to training, step by step: the default MLP trained with
// `loom train`'s strategy (sync/allreduce, the same options and keys), with each probed step's
// compressed sum compared to the exact fp32 sum of what the workers sent.
//
//   build-x/codec_probe_bench [--config configs/mlp.toml] [--set key=value ...] [--every 10]
//                             [--out probe.jsonl]
//
// One JSON line per probed step (rank 0 writes; figures over all ranks):
//   {"step", "epoch", "lr", "compressing", "tensors": [{"name": "l1.w", "exact": ||S||,
//    "err": ||D - S|| / ||S||, "cos": cos(D, S), "residual": ||R|| / ||S||}, ...]}
// where S is the exact sum over workers of what they handed to the codec (the gradient, or
// the local velocity with codec.momentum), D the decoded sum the optimizer received, and R the
// sum of every rank's error-feedback residuals (worker and owner side): the update still
// pending, in units of this step's sum. Then one line per epoch: {"epoch", "test_acc"}.
// Buckets are combined after backward (sync.overlap = false) so the probe can read the sum
// between backward and the update; that changes timing, not the arithmetic.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loom/comm/comm_options.h"
#include "loom/comm/communicator.h"
#include "loom/comm/transport_registry.h"
#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/core/rng.h"
#include "loom/data/loader/loader.h"
#include "loom/data/sources/dataset.h"
#include "loom/nn/graph/model.h"
#include "loom/optim/lr_schedule.h"
#include "loom/optim/optimizer.h"
#include "loom/plan/comm_reader.h"
#include "loom/plan/optim_reader.h"
#include "loom/plan/strategy_factory.h"
#include "loom/plan/sync_reader.h"
#include "loom/sync/allreduce/allreduce_strategy.h"
#include "loom/sync/model_parallel/model_parallel_model.h"
#include "loom/sync/strategy.h"
#include "loom/tensor/cpu/cpu_backend.h"

namespace {

using namespace loom;

struct Tensor {
  std::string name;
  int64_t offset, count;
};

std::vector<Tensor> tensors_of(const nn::Model& model) {
  std::vector<Tensor> out;
  for (const auto& r : model.param_ranges()) {
    int64_t at = r.offset;
    int k = 0;
    for (const auto& [rows, cols] : model.layers()[size_t(r.layer)]->param_matrices()) {
      out.push_back({fmt::format("l{}.{}", r.layer, k++ == 0 ? "w" : "b"), at, rows * cols});
      at += rows * cols;
    }
  }
  return out;
}

double test_accuracy(nn::Model& model, const data::Dataset& test) {
  const int64_t chunk = 1000, numel = test.sample_numel();
  double correct = 0;
  for (int64_t i = 0; i < test.count; i += chunk) {
    const int64_t n = std::min(chunk, test.count - i);
    nn::StepInfo info;
    info.training = false;
    const float* logits = model.forward(test.features.data() + i * numel, n, info);
    correct += double(
        model.backend().count_correct(logits, test.labels.data() + i, n, model.num_classes()));
  }
  return correct / double(test.count);
}

int run(const Config& cfg, int64_t every, const std::string& out_path) {
  const int workers = int(cfg.get_int("workers", 2, 2, 64));
  const uint64_t seed = uint64_t(cfg.get_int("seed", 0));
  const int64_t batch = cfg.get_int("batch", 128), epochs = cfg.get_int("epochs", 3);
  data::Normalisation norm;
  const std::string dir = cfg.get_string("data.dir", data::kDefaultFashionMnistDir);
  const data::Dataset train = data::load_fashion_mnist(dir, true, std::nullopt, &norm);
  const data::Dataset test = data::load_fashion_mnist(dir, false, norm, nullptr);
  auto source = std::make_shared<data::DatasetSource>(train);
  std::ofstream out(out_path);
  auto world = comm::create_world("thread", workers, plan::read_comm_options(cfg));
  world->run([&](comm::Communicator& c) {
    const bool lead = c.rank() == 0;
    Backend& be = cpu_backend();
    be.set_intra_op_threads(int(cfg.get_int("threads", 1)));
    auto model = plan::build_model(cfg, c, be, source->sample_shape(), source->num_classes());
    model->init_params(seed);
    auto opt = optim::make_optimizer(plan::read_optimizer_options(cfg), be, model->num_params());
    data::LoaderOptions lo;
    lo.global_batch = batch * workers;
    lo.rank = c.rank();
    lo.world = workers;
    lo.seed = seed;
    data::Loader loader(source, lo);
    const int64_t spe = loader.steps_per_epoch(), total = spe * epochs;
    const optim::LrSchedule schedule =
        optim::make_lr_schedule(plan::read_lr_schedule_options(cfg), spe, total);
    auto strategy = plan::make_strategy(cfg, c, *model, *opt, total);
    auto* ar = dynamic_cast<sync::AllreduceStrategy*>(strategy.get());
    LOOM_CHECK(ar != nullptr, "the probe runs sync = \"allreduce\"");
    const std::vector<Tensor> tensors = tensors_of(*model);
    const size_t n = size_t(model->num_params());
    std::vector<float> sent(n), pending(n);
    strategy->start();
    if (lead) std::fprintf(stderr, "%s\n", strategy->describe().c_str());
    int64_t step = 0;
    for (int64_t epoch = 0; epoch < epochs; ++epoch) {
      loader.start_epoch(epoch);
      data::Batch b;
      while (loader.next(b)) {
        const bool probe = step % every == 0;
        nn::StepInfo info;
        info.dropout_key = derive_key(seed, 0, RngPurpose::kDropout, uint64_t(step));
        info.sample_offset = b.global_offset;
        const float lr = float(schedule.at(step));
        strategy->begin_step(step, lr);
        model->forward(b.x, b.size, info);
        model->loss(b.y, strategy->grad_scale(b.size));
        model->backward([&](const nn::ParamRange& r) { strategy->on_gradients_ready(r); });
        if (probe) std::copy(model->grads(), model->grads() + n, sent.begin());
        strategy->end_step();
        ++step;
        if (!probe) continue;
        // What the codec was handed: the gradient, or the local velocity when the strategy
        // compresses momentum (its state after the step holds this step's velocity).
        sync::StrategyState st;
        strategy->save_state(st);
        std::fill(pending.begin(), pending.end(), 0.0f);
        for (size_t k = 0; k < ar->buckets().size(); ++k) {
          const sync::Bucket& bk = ar->buckets()[k];
          auto v = st.floats.find(fmt::format("bucket{}.local_velocity", k));
          if (v != st.floats.end())
            std::copy(v->second.begin(), v->second.end(), sent.begin() + bk.offset);
          for (int j = 0; j < workers; ++j) {
            auto r = st.floats.find(fmt::format("bucket{}.worker{}.residual", k, j));
            if (r == st.floats.end()) continue;
            const comm::BlockRange s = r->second.size() == size_t(bk.count)
                                           ? comm::BlockRange{0, size_t(bk.count)}
                                           : comm::block_range(size_t(bk.count), workers, j);
            for (size_t i = 0; i < s.size(); ++i)
              pending[size_t(bk.offset) + s.begin + i] += r->second[i];
          }
          auto o = st.floats.find(fmt::format("bucket{}.owner.residual", k));
          if (o != st.floats.end() && !o->second.empty()) {
            const comm::BlockRange s = comm::block_range(size_t(bk.count), workers, c.rank());
            for (size_t i = 0; i < s.size(); ++i)
              pending[size_t(bk.offset) + s.begin + i] += o->second[i];
          }
        }
        c.allreduce(std::span<float>(sent));
        c.allreduce(std::span<float>(pending));
        if (!lead) continue;
        nlohmann::json row = {{"step", step - 1}, {"epoch", epoch}, {"lr", lr}};
        nlohmann::json ts = nlohmann::json::array();
        const float* d = model->grads();
        for (const Tensor& t : tensors) {
          double ss = 0, ee = 0, dd = 0, sd = 0, rr = 0;
          for (int64_t i = t.offset; i < t.offset + t.count; ++i) {
            const double s = sent[size_t(i)], x = d[i], r = pending[size_t(i)];
            ss += s * s;
            dd += x * x;
            sd += s * x;
            ee += (x - s) * (x - s);
            rr += r * r;
          }
          const double sn = std::sqrt(ss);
          ts.push_back({{"name", t.name},
                        {"exact", sn},
                        {"err", sn > 0 ? std::sqrt(ee) / sn : 0},
                        {"cos", ss > 0 && dd > 0 ? sd / std::sqrt(ss * dd) : 0},
                        {"residual", sn > 0 ? std::sqrt(rr) / sn : 0}});
        }
        row["tensors"] = ts;
        out << row.dump() << "\n";
      }
      strategy->finish();
      if (lead) {
        const double acc = test_accuracy(*model, test);
        out << nlohmann::json({{"epoch", epoch + 1}, {"test_acc", acc}}).dump() << "\n";
        out.flush();
        std::fprintf(stderr, "epoch %lld: test acc %.4f\n", (long long)(epoch + 1), acc);
      }
    }
  });
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config = "configs/mlp.toml", out = "probe.jsonl";
  std::vector<std::string> sets;
  int64_t every = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "codec_probe_bench: %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--config")
      config = v;
    else if (a == "--set")
      sets.push_back(v);
    else if (a == "--every")
      every = std::max<int64_t>(1, std::stoll(v));
    else if (a == "--out")
      out = v;
    else {
      std::fprintf(stderr, "codec_probe_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  try {
    loom::Config cfg = loom::Config::from_file(config);
    cfg.set_override("workers=2");
    for (const auto& s : sets) cfg.set_override(s);
    cfg.set_override("sync.overlap=false");
    return run(cfg, every, out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "codec_probe_bench: %s\n", e.what());
    return 1;
  }
}
