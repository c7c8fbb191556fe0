// codec = "auto" on a network no accuracy row describes (a residual CNN of the user's own): the
// run starts lossless, replays its own gradients of the first 30 steps through each lossy
// candidate codec, and the check weighs what that shows (perf/codec_fidelity.h). Whole runs
// over the thread transport.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/tiny_run.h"
#include "data/temp_dir.h"
#include "loom/train/trainer.h"

namespace loom::train {
namespace {

namespace fs = std::filesystem;
using loom::data::testing::TempDir;
using loom::testing::tiny_run;
using loom::testing::with_tiny_residual_graph;

nlohmann::json auto_summary_of(const Config& cfg, const std::string& dir) {
  run_training(plan::read_run_plan(cfg));
  std::ifstream in(fs::path(dir) / "summary.json");
  return nlohmann::json::parse(in)["auto"];
}

Config own_network(int steps, const std::string& out) {
  Config cfg = with_tiny_residual_graph(tiny_run(2, 16, steps));
  cfg.set("codec", std::string("auto"));
  cfg.set("output.dir", out);
  return cfg;
}

TEST(AutoFidelityRun, TheCheckWeighsEachLossyCodecsFidelityOnTheRunsGradients) {
  TempDir dir;
  const nlohmann::json a = auto_summary_of(own_network(40, dir.path()), dir.path());
  // At the start: no row, no fidelity yet, so lossless, saying what it waits for.
  EXPECT_EQ(a["chosen"]["codec"], "fp32");
  EXPECT_NE(a["fidelity_pending"].get<std::string>().find("first 30 steps"), std::string::npos);
  for (const nlohmann::json& c : a["candidates"])
    if (c["codec"] != "fp32") {
      EXPECT_NE(c["excluded"].get<std::string>().find("yet"), std::string::npos) << c.dump();
    }
  // At the check: every lossy codec through the allreduce has its figures and a verdict.
  const nlohmann::json& v = a["revision"];
  ASSERT_TRUE(v.contains("candidates")) << v.dump(1);
  double fp16 = -1, onebit = -1;
  for (const nlohmann::json& c : v["candidates"]) {
    if (c["codec"] == "fp32") continue;
    ASSERT_TRUE(c.contains("fidelity")) << c.dump();
    EXPECT_EQ(c["fidelity"]["steps"], 30);
    const std::string risk = c["fidelity_verdict"]["risk"];
    EXPECT_TRUE(risk == "within" || risk == "over" || risk == "unknown") << risk;
    if (c["codec"] == "fp16") fp16 = c["fidelity"]["drift"];
    if (c["codec"] == "onebit") onebit = c["fidelity"]["drift"];
    if (c["codec"] == "fp16") {
      EXPECT_EQ(risk, "within") << c.dump();
    }
    // What the verdict excludes, the candidate says.
    if (risk != "within") {
      EXPECT_FALSE(c.value("excluded", std::string()).empty()) << c.dump();
    }
  }
  ASSERT_GE(fp16, 0);
  ASSERT_GE(onebit, 0);
  EXPECT_LT(fp16, onebit);
  // Whatever runs after the check is allowed by it.
  const nlohmann::json& after = v["after"];
  if (after["codec"] != "fp32") {
    EXPECT_EQ(after["fidelity_verdict"]["risk"], "within") << v.dump(1);
  }
}

TEST(AutoFidelityRun, NothingIsReplayedWhenLossyCodecsAreForbidden) {
  TempDir dir;
  Config cfg = own_network(40, dir.path());
  cfg.set("auto.lossy", false);
  const nlohmann::json a = auto_summary_of(cfg, dir.path());
  EXPECT_FALSE(a.contains("fidelity_pending"));
  // The check ran; had it been handed fidelity figures, it would have ranked the candidates
  // again and listed them with their figures.
  ASSERT_TRUE(a.contains("revision"));
  EXPECT_NE(a["revision"]["outcome"], "not checked");
  if (a["revision"].contains("candidates")) {
    for (const nlohmann::json& c : a["revision"]["candidates"])
      EXPECT_FALSE(c.contains("fidelity"));
  }
}

}  // namespace
}  // namespace loom::train
