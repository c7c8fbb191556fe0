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
  // Fashion-MNIST's shapes (loom's default data): the graph is built on them.
  const nn::Shape input = {1, 28, 28};
  const int classes = 10;
  const int64_t max_steps = cfg.get_int("max_steps", 0, 0, int64_t(1) << 40);
  int64_t steps = cfg.get_int("epochs", 3, 1, 1 << 20) * (60000 / (batch * workers));
  if (max_steps > 0) steps = std::min(steps, max_steps);

  const plan::RunPlan run = plan::read_run_plan(cfg);
  std::unique_ptr<comm::World> world =
      comm::create_world("thread", workers, plan::read_comm_options(cfg));
  std::string log;
  std::mutex mu;
  world->run([&](comm::Communicator& c) {
    Backend& be = cpu_backend();
    const train::AutoResolution r = train::resolve_auto(run, c, be, input, classes, steps);
    if (c.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      log = r.log;
    }
  });
  fmt::print("# loom advise --run {}: {} workers x batch {}, {} threads each, thread transport\n",
             a.config, workers, batch, threads);
  fmt::print("{}", log);
}

}  // namespace loom::cli
