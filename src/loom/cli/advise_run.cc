#include "loom/cli/advise_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>

#include "loom/comm/transport_registry.h"
#include "loom/compress/registry.h"
#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/plan/batch_reader.h"
#include "loom/plan/codec_reader.h"
#include "loom/plan/comm_reader.h"
#include "loom/plan/train_settings.h"
#include "loom/tensor/backend_registry.h"
#include "loom/train/auto_config.h"
#include "loom/train/run_data.h"

namespace loom::cli {

void advise_run(const AdviseRunArgs& a) {
  Config cfg = Config::from_file(a.config);
  for (const auto& s : a.sets) cfg.set_override(s);
  const std::string transport = comm::resolve_transport(cfg.get_string("transport", "auto"));
  if (transport != "thread")
    throw ConfigError(fmt::format(
        "{}: loom advise --run measures the thread transport; for transport \"{}\" run `loom "
        "train` with codec = \"auto\" (it measures the run's own transport at start)",
        a.config, transport));
  if (!cfg.has(plan::codec_key(cfg))) cfg.set("codec", std::string("auto"), "advise");
  if (!cfg.has("sync")) cfg.set("sync", std::string("auto"), "advise");
  if (!cfg.has("sync.bucket_kib")) cfg.set("sync.bucket_kib", std::string("auto"), "advise");
  if (!a.calibration.empty()) {
    cfg.set("auto.calibration", a.calibration, "--calibration");
    cfg.set("auto.calibration_mismatch", a.mismatch, "--calibration-mismatch");
  }
  const int workers = int(cfg.get_int("workers", 2, 1, 4096));
  const int threads = int(plan::read_threads(cfg));
  const int64_t batch = plan::read_batch(cfg);
  const plan::RunPlan run = plan::read_run_plan(cfg);
  // The config's own data: its sample shape builds the graph, its size counts the steps.
  const train::DataShape data = train::read_data_shape(run.settings, run.pipeline);
  const nn::Shape& input = data.sample;
  const int classes = data.outputs;
  const int64_t per_epoch = data.count / std::max<int64_t>(1, batch * workers);
  int64_t steps = std::max<int64_t>(1, run.settings.epochs * per_epoch);
  if (run.settings.max_steps > 0) steps = std::min(steps, run.settings.max_steps);

  std::unique_ptr<comm::World> world =
      comm::create_world("thread", workers, plan::read_comm_options(cfg));
  std::string log;
  std::mutex mu;
  world->run([&](comm::Communicator& c) {
    Backend& be = cpu_backend();
    const train::AutoResolution r =
        train::resolve_auto(run, c, be, input, classes, steps, data.tokens);
    if (c.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      log = r.log;
    }
  });
  fmt::print(
      "# loom advise --run {}: {} workers x batch {}, {} threads each, thread transport; data: "
      "{} samples of [{}], {} outputs\n",
      a.config, workers, batch, threads, data.count, fmt::join(input, ", "), classes);
  fmt::print("{}", log);
}

}  // namespace loom::cli
