// `loom train --timeline`: the trace of a short 2-worker run parses as JSON and shows
// communication on the comm thread overlapping backward on the compute thread.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "loom/train/trainer.h"

namespace loom::train {
namespace {
namespace fs = std::filesystem;

Config traced_run(const fs::path& trace, int64_t steps, int64_t trace_steps) {
  Config cfg;
  cfg.set("workers", int64_t(2));
  cfg.set("batch", int64_t(32));
  cfg.set("max_steps", steps);
  cfg.set("epochs", int64_t(1));
  cfg.set("eval", false);
  cfg.set("progress", std::string("none"));
  cfg.set("log.level", std::string("warn"));
  cfg.set("output.dir", std::string(""));
  cfg.set_override("mlp.hidden=[256, 64]");
  cfg.set("sync.bucket_kib", int64_t(1));  // one bucket per layer: three buckets
  cfg.set("sync.overlap", true);  // the default may turn it off when the workers fill the cores
  cfg.set("trace.file", trace.string());
  cfg.set("trace.steps", trace_steps);
  return cfg;
}

nlohmann::json read_trace(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

TEST(Timeline, TwentyStepsOfTwoWorkersShowCommOverlappingBackward) {
  const fs::path trace =
      fs::temp_directory_path() / ("loom_timeline_" + std::to_string(::getpid()) + ".json");
  run_training(plan::read_run_plan(traced_run(trace, 20, 20)));
  const nlohmann::json events = read_trace(trace);
  ASSERT_TRUE(events.is_array());

  struct Interval {
    double a, b;
  };
  std::map<int, std::vector<Interval>> backward, comm;  // by worker
  std::map<int, int> steps;
  std::set<std::string> names;
  for (const auto& e : events) {
    const std::string name = e["name"];
    if (e["ph"] == "M") continue;
    names.insert(name.substr(0, name.find(' ')));
    const int pid = e["pid"];
    if (e["ph"] != "X") continue;
    const double a = e["ts"], b = a + e["dur"].get<double>();
    if (e["cat"] == "backward") backward[pid].push_back({a, b});
    if (e["cat"] == "comm" && e["tid"] == 1) comm[pid].push_back({a, b});
    if (e["cat"] == "step") ++steps[pid];
  }
  EXPECT_EQ(steps[0], 20);
  EXPECT_EQ(steps[1], 20);
  // "sharded update": reduce-scatter, the optimizer on this rank's block and allgather, which
  // the thread transport fuses into one pass.
  for (const char* n : {"fwd", "bwd", "bucket", "combine", "sharded", "loader", "wait"})
    EXPECT_TRUE(names.count(n)) << "no event named " << n << "...";

  int overlaps = 0;
  for (int pid : {0, 1})
    for (const auto& c : comm[pid])
      for (const auto& bw : backward[pid]) overlaps += c.a < bw.b && bw.a < c.b;
  EXPECT_GT(overlaps, 0) << "no comm-thread event intersects a backward event";
  fs::remove(trace);
}

TEST(Timeline, TraceStepsBoundsTheFile) {
  const fs::path trace =
      fs::temp_directory_path() / ("loom_timeline_b_" + std::to_string(::getpid()) + ".json");
  run_training(plan::read_run_plan(traced_run(trace, 12, 3)));
  int step_spans = 0;
  for (const auto& e : read_trace(trace)) step_spans += e["ph"] == "X" && e["cat"] == "step";
  EXPECT_EQ(step_spans, 2 * 3);
  fs::remove(trace);
}

}  // namespace
}  // namespace loom::train
