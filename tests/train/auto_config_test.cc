#include "loom/train/auto_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>

#include "loom/comm/transport_registry.h"
#include "loom/core/error.h"
#include "loom/measure/machine_identity.h"
#include "loom/optim/optimizer.h"
#include "loom/plan/auto_reader.h"
#include "loom/plan/optim_reader.h"
#include "loom/tensor/backend_registry.h"

namespace loom::train {
namespace {

using ::testing::HasSubstr;

// A small MLP on 2 thread workers. Trained with SGD and momentum, the MLP family's accuracy
// rows apply to it whatever its widths; with Adam (tables "[optim]\nname = \"adam\"\n") none does.
// `top`: top-level keys; `tables`: [tables] after the model's.
Config small(const std::string& top, const std::string& tables = "") {
  return Config::from_string(
      "model = \"mlp\"\nbatch = 16\n" + top + "[mlp]\nhidden = [32]\n" + tables, "auto.toml");
}

// resolve_auto on every rank of a 2-worker thread world; rank 0's result and the plan revised
// with its choice.
std::pair<AutoResolution, plan::RunPlan> resolve(const Config& cfg) {
  const plan::RunPlan run = plan::read_run_plan(cfg);
  auto world = comm::create_world("thread", 2, comm::CommOptions{});
  AutoResolution out;
  plan::RunPlan revised;
  std::mutex mu;
  world->run([&](comm::Communicator& c) {
    AutoResolution r = resolve_auto(run, c, cpu_backend(), {1, 28, 28}, 10, 100);
    if (c.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      out = r;
      revised = r.choice ? plan::with_sync_choice(run, *r.choice, r.choice_where) : run;
    }
  });
  return {out, revised};
}

TEST(AutoConfig, NothingAutoLeavesTheConfigAlone) {
  const Config cfg = small("codec = \"int8\"\n");
  EXPECT_FALSE(plan::read_run_plan(cfg).wants_auto());
  const auto [r, after] = resolve(cfg);
  EXPECT_FALSE(r.active);
  EXPECT_EQ(after.codec, "int8");
}

// Whatever the timings, a network without measured accuracy deltas gets a lossless choice at
// the start (its lossy options wait for their fidelity), the config carries it, and
// summary.json's object names the choice and the runner-up.
TEST(AutoConfig, AUsersOwnNetworkGetsFp32ThroughTheAllreduce) {
  const auto [r, after] =
      resolve(small("codec = \"auto\"\nsync = \"auto\"\n", "[optim]\nname = \"adam\"\n"));
  ASSERT_TRUE(r.active);
  EXPECT_EQ(after.codec, "fp32");
  EXPECT_EQ(after.sync_kind, "allreduce");
  EXPECT_TRUE(r.decision.chosen.lossless());
  EXPECT_GT(r.measured.compute_s, 0);
  EXPECT_GT(r.measured.link.bytes_per_s, 0);
  EXPECT_GT(r.measured.cost_s, 0);
  const nlohmann::json j = nlohmann::json::parse(r.json);
  EXPECT_EQ(j["chosen"]["codec"], "fp32");
  EXPECT_TRUE(j.contains("runner_up"));
  EXPECT_GT(j["measured"]["cost_share_of_1000_steps"].get<double>(), 0);
  EXPECT_THAT(r.log, HasSubstr("auto: chose fp32, allreduce"));
  EXPECT_THAT(r.log, HasSubstr("measuring cost"));
}

TEST(AutoConfig, BucketSizeAloneIsChosenAmongTheCandidates) {
  const auto [r, after] = resolve(small("sync.bucket_kib = \"auto\"\n"));
  ASSERT_TRUE(r.active);
  const int64_t kib = after.bucket_kib;
  EXPECT_TRUE(kib == 1024 || kib == 4096 || kib == 16384) << kib;
  EXPECT_EQ(after.codec, "fp32");  // not auto: unchanged
  for (const auto& k : r.decision.candidates) EXPECT_EQ(k.codec, "fp32");
}

TEST(AutoConfig, ACalibrationFileOfAnotherMachineIsRefusedOrMeasuredInstead) {
  const std::string file =
      (std::filesystem::temp_directory_path() / "loom_auto_config_cal.jsonl").string();
  {
    std::ofstream out(file);
    out << "{\"bench\":\"machine\",\"cpu\":\"Some Other CPU\",\"transport\":\"thread\","
           "\"world_size\":2,\"format_version\":2}\n"
           "{\"bench\":\"gemm\",\"gflops\":100,\"format_version\":2}\n";
  }
  const std::string extra = "[auto]\ncalibration = \"" + file + "\"\n";
  try {
    resolve(small("codec = \"auto\"\n", extra));
    FAIL() << "a calibration file of another CPU was used";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr(file));
    EXPECT_THAT(e.what(), HasSubstr("CPU: file 'Some Other CPU', this machine '" +
                                    measure::cpu_model() + "'"));
  }
  const auto [r, after] =
      resolve(small("codec = \"auto\"\n", extra + "calibration_mismatch = \"measure\"\n"));
  EXPECT_TRUE(r.active);
  EXPECT_THAT(r.measured.source, HasSubstr("at start"));
  std::filesystem::remove(file);
}

// Block momentum cannot clip the combined gradient: with optim.clip_norm, sync = "auto"
// weighs the allreduce only, so the strategy it builds accepts the config.
TEST(AutoConfig, ClippingKeepsSyncAutoToTheAllreduce) {
  const auto [r, after] = resolve(small("sync = \"auto\"\n", "[optim]\nclip_norm = 1.0\n"));
  ASSERT_TRUE(r.active);
  EXPECT_EQ(after.sync_kind, "allreduce");
  for (const auto& k : r.decision.candidates) EXPECT_EQ(k.sync, "allreduce") << k.label();
}

TEST(AutoConfig, OneWorkerHasNothingToChoose) {
  auto world = comm::create_world("thread", 1, comm::CommOptions{});
  world->run([&](comm::Communicator& c) {
    const plan::RunPlan run = plan::read_run_plan(small("codec = \"auto\"\nsync = \"auto\"\n"));
    const AutoResolution r = resolve_auto(run, c, cpu_backend(), {1, 28, 28}, 10, 100);
    EXPECT_TRUE(r.active);
    EXPECT_EQ(r.measured.cost_s, 0);  // nothing measured
    ASSERT_TRUE(r.choice.has_value());
    const plan::RunPlan after = plan::with_sync_choice(run, *r.choice, r.choice_where);
    EXPECT_EQ(after.codec, "fp32");
    EXPECT_EQ(after.sync_kind, "allreduce");
    EXPECT_THAT(after.text, HasSubstr("codec = \"fp32\""));
  });
}

// Before a switch, the sharded optimizer's state is put together: each rank's buffer is current
// only where it owns the elements (garbage, here NaN, elsewhere), and afterwards every rank
// holds every owner's values.
TEST(AutoConfig, GatheringTheShardedOptimizerStateGivesEveryRankTheWhole) {
  auto world = comm::create_world("thread", 2, comm::CommOptions{});
  const int64_t n = 10;
  // Rank 0 owns [0, 3) and [7, 10), rank 1 [3, 7): the value of element i is 0.5 + i.
  const std::vector<std::vector<std::pair<int64_t, int64_t>>> owned = {{{0, 3}, {7, 3}}, {{3, 4}}};
  std::vector<std::vector<float>> got(2);
  world->run([&](comm::Communicator& c) {
    Config cfg = Config::from_string("[optim]\nmomentum = 0.9\n", "o.toml");
    auto opt = optim::make_optimizer(plan::read_optimizer_options(cfg), cpu_backend(), n);
    const std::vector<optim::StateBuffer> state = opt->state();
    ASSERT_FALSE(state.empty());
    float* v = state[0].data;
    for (int64_t i = 0; i < n; ++i) v[i] = std::nanf("");
    for (const auto& [offset, count] : owned[size_t(c.rank())])
      for (int64_t i = offset; i < offset + count; ++i) v[i] = 0.5f + float(i);
    gather_optimizer_state(c, cpu_backend(), *opt, owned[size_t(c.rank())]);
    got[size_t(c.rank())].assign(v, v + n);
  });
  for (int r = 0; r < 2; ++r)
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(got[size_t(r)][size_t(i)], 0.5f + float(i)) << r;
}

// The check window: auto.check_after steps after the run's start (a resume's step included),
// auto.check_steps long, whole blocks with block momentum; none when the run ends before a
// step could follow it, when the check is off, or when the choice was not decided here.
TEST(AutoConfig, TheCheckWindowFollowsTheWarmUpAndHoldsWholeBlocks) {
  AutoResolution res;
  res.active = true;
  res.decided = true;
  res.decision.chosen.sync = "allreduce";
  const Config cfg = small("codec = \"auto\"\n");
  AutoCheckWindow w = auto_check_window(plan::read_auto_options(cfg), res, 0, 1000);
  EXPECT_EQ(w.first, 10);
  EXPECT_EQ(w.steps, 20);
  EXPECT_TRUE(w.holds(29));
  EXPECT_FALSE(w.holds(30));
  w = auto_check_window(plan::read_auto_options(cfg), res, 500,
                        1000);  // a resume that decided again
  EXPECT_EQ(w.first, 510);
  res.decision.chosen.sync = "bmuf";
  res.decision.chosen.tau = 8;
  w = auto_check_window(plan::read_auto_options(cfg), res, 0, 1000);
  EXPECT_EQ(w.steps, 24);  // 3 blocks of 8
  w = auto_check_window(plan::read_auto_options(cfg), res, 0, 34);
  EXPECT_FALSE(w.active());
  EXPECT_THAT(w.skipped, HasSubstr("the run ends at step 34"));
  EXPECT_TRUE(auto_check_window(plan::read_auto_options(cfg), res, 0, 35).active());
  const Config off = small("codec = \"auto\"\n", "[auto]\ncheck_steps = 0\n");
  EXPECT_THAT(auto_check_window(plan::read_auto_options(off), res, 0, 1000).skipped,
              HasSubstr("check_steps = 0"));
  res.decided = false;
  res.kept_from = "ck/step-000000000040";
  EXPECT_THAT(auto_check_window(plan::read_auto_options(cfg), res, 40, 1000).skipped,
              HasSubstr("kept from ck/step-"));
  res.active = false;
  EXPECT_EQ(auto_check_window(plan::read_auto_options(cfg), res, 0, 1000).skipped, "");
}

TEST(AutoConfig, AutoWithTheParameterServerIsAConfigError) {
  EXPECT_THROW(resolve(small("codec = \"auto\"\nsync = \"ps\"\n")), ConfigError);
}

}  // namespace
}  // namespace loom::train
