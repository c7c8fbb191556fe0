#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "loom/core/error.h"
#include "loom/experiments/report_data.h"
#include "loom/experiments/report_html.h"

namespace loom::experiments {
namespace {
namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / ("loom_report_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// An epoch line of this build's format: validation figures after the epoch, no test figure.
std::string epoch_line(int epoch, double loss, double acc, int workers) {
  return fmt::format(
      R"({{"epoch":{},"steps":100,"train_loss":{},"train_acc":{},"val_loss":{},"val_acc":{},)"
      R"("seconds":2.0,"samples_per_s":{},"compute_s":1.2,"comm_s":0.9,"exposed_comm_s":0.3,)"
      R"("loader_wait_s":0.1,"bytes_sent":1000000,"workers":{},"format_version":2}})",
      epoch, loss, acc - 0.02, loss + 0.05, acc, 6400 * workers, workers);
}

// An epoch line of metrics format 1, which evaluated the test set after every epoch.
std::string epoch_line_v1(int epoch, double loss, double acc) {
  return fmt::format(
      R"({{"epoch":{},"steps":100,"train_loss":{},"train_acc":{},"test_acc":{},"seconds":2.0,)"
      R"("samples_per_s":6400,"workers":1,"format_version":1}})",
      epoch, loss, acc - 0.02, acc);
}

// Three runs: complete, cut short (no summary, a truncated last line), config only.
fs::path synthetic_runs() {
  const fs::path d = fresh_dir("runs");
  write(d / "fp32/config.toml", "codec = \"fp32\"\nworkers = 1\n");
  write(d / "fp32/metrics.jsonl", epoch_line(1, 0.6, 0.80, 1) + "\n" +
                                      epoch_line(2, 0.45, 0.84, 1) + "\n" +
                                      epoch_line(3, 0.40, 0.86, 1) + "\n");
  write(d / "fp32/summary.json", R"({"test_acc":0.86,"samples_per_s":6400,"workers":1})");
  write(d / "int8/config.toml", "codec = \"int8\"\nworkers = 2\n");
  write(d / "int8/metrics.jsonl", epoch_line(1, 0.62, 0.79, 2) + "\n" +
                                      epoch_line(2, 0.47, 0.83, 2) + "\n" +
                                      R"({"epoch":3,"steps":10)");
  write(d / "crashed/config.toml", "codec = \"onebit\"\nworkers = 2\n");
  return d;
}

TEST(Report, SyntheticRunsGiveThePlotsAndNameTheProblems) {
  const fs::path d = synthetic_runs();
  const std::vector<RunData> runs =
      load_runs({(d / "fp32").string(), (d / "int8").string(), (d / "crashed").string()});
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].epochs.size(), 3u);
  EXPECT_EQ(runs[1].epochs.size(), 2u);  // the truncated third line is skipped
  EXPECT_EQ(runs[0].label, "codec=fp32 workers=1");
  EXPECT_TRUE(runs[0].problems.empty());
  ASSERT_EQ(runs[1].problems.size(), 2u);
  EXPECT_NE(runs[1].problems[0].find("line 3 is truncated"), std::string::npos);
  EXPECT_NE(runs[1].problems[1].find("summary.json is missing"), std::string::npos);
  EXPECT_NE(runs[2].problems[0].find("metrics.jsonl is missing"), std::string::npos);

  const std::string html = render_report(runs, {});
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t p = html.find(what); p != std::string::npos; p = html.find(what, p + 1)) ++n;
    return n;
  };
  // Loss, accuracy, validation loss, throughput, step breakdown; final accuracy, throughput.
  // No scaling chart: the runs with 1 and 2 workers also differ in their codec.
  EXPECT_EQ(count("<svg"), 7u);
  EXPECT_NE(html.find("Validation loss"), std::string::npos);
  EXPECT_NE(html.find("val acc (last epoch)"), std::string::npos);
  EXPECT_NE(html.find("test acc (final weights)"), std::string::npos);
  EXPECT_EQ(html.find("metrics format 1"), std::string::npos);
  EXPECT_GE(count("<polyline class=\"series\""), 2u * 3 + 2);
  EXPECT_GE(count("<rect class=\"bar\""), 3u);
  EXPECT_NE(html.find("Where a step's time goes"), std::string::npos);
  EXPECT_EQ(html.find("Scaling with workers"), std::string::npos);
  EXPECT_NE(html.find("line 3 is truncated"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // nothing to fetch
  fs::remove_all(d);
}

// Many runs: each is named by its directory (the differing keys go to a table column and
// tooltips), the scaling chart joins only runs that differ in workers alone, and step lines
// give the loss curve its points.
TEST(Report, RunsAreNamedByDirectoryAndScalingJoinsOnlyRunsThatDifferInWorkers) {
  const fs::path d = fresh_dir("many");
  const std::string long_tail =
      "mlp.hidden = [2048, 2048]\noptim.lr = 0.1\nseed = 3\nbatch = 256\nlr.schedule = \"step\"\n";
  for (int w : {1, 2, 4}) {
    const std::string name = "fp32-" + std::to_string(w) + "w";
    write(d / "a" / name / "config.toml",
          "codec = \"fp32\"\nworkers = " + std::to_string(w) + "\n" + long_tail);
    std::string lines;
    for (int s = 50; s <= 150; s += 50)
      lines += fmt::format(R"({{"kind":"step","epoch":1,"step":{},"train_loss":{}}})", s, 1.0 / s) +
               "\n";
    write(d / "a" / name / "metrics.jsonl", lines + epoch_line(1, 0.5, 0.8, w) + "\n");
  }
  write(d / "b/fp32-2w/config.toml", "codec = \"int8\"\nworkers = 2\n" + long_tail);
  write(d / "b/fp32-2w/metrics.jsonl", epoch_line(1, 0.5, 0.8, 2) + "\n");
  const std::vector<RunData> runs = load_runs({(d / "a").string(), (d / "b/fp32-2w").string()});
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].display(), "fp32-1w");
  EXPECT_EQ(runs[1].display(), "a/fp32-2w");  // two runs share the directory name
  EXPECT_EQ(runs[3].display(), "b/fp32-2w");
  EXPECT_EQ(runs[0].steps.size(), 3u);
  EXPECT_EQ(runs[0].epochs.size(), 1u);
  EXPECT_EQ(runs[3].label, "workers=2 codec=int8");
  EXPECT_EQ(scaling_group(runs[0]), scaling_group(runs[2]));
  EXPECT_NE(scaling_group(runs[1]), scaling_group(runs[3]));

  const std::string html = render_report(runs, {});
  EXPECT_NE(html.find("Scaling with workers"), std::string::npos);
  // One measured line of the three fp32 runs and its ideal; the int8 run is on neither.
  EXPECT_NE(html.find("ideal for fp32-1w, a/fp32-2w, fp32-4w"), std::string::npos);
  EXPECT_EQ(html.find("fp32-4w, b/fp32-2w"), std::string::npos);
  EXPECT_EQ(html.find("ideal for b/fp32-2w"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"keys\">workers=2 codec=int8</td>"), std::string::npos);
  fs::remove_all(d);
}

TEST(Report, ASweepDirectoryStandsForItsTrialsAndAMissingDirIsAnError) {
  const fs::path d = fresh_dir("sweep");
  write(d / "trials/t000/metrics.jsonl", epoch_line(1, 0.5, 0.8, 1) + "\n");
  write(d / "trials/t001/metrics.jsonl", epoch_line(1, 0.4, 0.82, 1) + "\n");
  const auto runs = load_runs({d.string()});
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].name, "t000");
  EXPECT_THROW(load_runs({(d / "nope").string()}), InputError);
  fs::create_directories(d / "empty");
  EXPECT_THROW(load_runs({(d / "empty").string()}), InputError);
  const fs::path out = d / "r/report.html";
  const ReportOutcome o = write_report({d.string()}, out.string(), {});
  EXPECT_EQ(o.runs, 2);
  EXPECT_TRUE(fs::exists(out));
  fs::remove_all(d);
}

std::string load_error(const fs::path& run) {
  try {
    load_runs({run.string()});
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Lines written by this build (format_version 2), by format 1 (a per-epoch test_acc) and by
// older ones (none) are read; a metrics line or summary of a newer version stops the report
// naming the file and version.
TEST(Report, NewerFormatVersionsAreRefusedNamingTheFile) {
  const fs::path d = fresh_dir("versions");
  nlohmann::json v1 = nlohmann::json::parse(epoch_line(2, 0.45, 0.84, 1));
  v1["format_version"] = 1;
  nlohmann::json v0 = v1;
  v0.erase("format_version");
  write(d / "mixed/metrics.jsonl", v0.dump() + "\n" + v1.dump() + "\n");
  write(d / "mixed/summary.json", R"({"format_version":1,"test_acc":0.86})");
  const auto runs = load_runs({(d / "mixed").string()});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].epochs.size(), 2u);
  EXPECT_TRUE(runs[0].summary.has_value());

  // A run of metrics format 1 keeps its per-epoch test curve, named for what it is, and its
  // last epoch's test accuracy stands for the final one when the summary is missing.
  write(d / "old/metrics.jsonl",
        epoch_line_v1(1, 0.6, 0.80) + "\n" + epoch_line_v1(2, 0.5, 0.83) + "\n");
  const auto old = load_runs({(d / "old").string()});
  ASSERT_EQ(old.size(), 1u);
  const std::string html = render_report(old, {});
  EXPECT_NE(html.find("(test, per epoch: metrics format 1)"), std::string::npos);
  EXPECT_NE(html.find("<td>0.8300</td>"), std::string::npos);

  nlohmann::json v9 = v1;
  v9["format_version"] = 3;
  write(d / "newer_metrics/metrics.jsonl", epoch_line(1, 0.6, 0.80, 1) + "\n" + v9.dump() + "\n");
  std::string msg = load_error(d / "newer_metrics");
  EXPECT_NE(msg.find((d / "newer_metrics/metrics.jsonl").string() + ":2"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("metrics format version 3"), std::string::npos) << msg;

  write(d / "newer_summary/metrics.jsonl", epoch_line(1, 0.6, 0.80, 1) + "\n");
  write(d / "newer_summary/summary.json", R"({"format_version":2,"test_acc":0.86})");
  msg = load_error(d / "newer_summary");
  EXPECT_NE(msg.find((d / "newer_summary/summary.json").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("summary format version 2"), std::string::npos) << msg;
  fs::remove_all(d);
}

// A token run's summary names the unit of its bits: the report shows them per byte (or
// character), and a report of image runs alone has no token table.
TEST(Report, TokenRunsShowBitsPerTheirUnit) {
  const fs::path d = fresh_dir("tokens");
  write(d / "bytes/config.toml", "data.context = 1\n");
  write(d / "bytes/metrics.jsonl", epoch_line(1, 2.5, 0.3, 1) + "\n");
  write(d / "bytes/summary.json",
        R"({"test_acc":null,"samples_per_s":100,"workers":1,"token_unit":"byte",)"
        R"("val_bits_per_byte":3.25,"train_bits_per_byte":3.5,"test_bits_per_byte":null,)"
        R"("tokens_per_s":12345,"context":1,"vocab":{"kind":"bytes","size":256}})");
  const std::string html = render_report(load_runs({(d / "bytes").string()}), {});
  EXPECT_NE(html.find("<td>bits per byte</td><td>3.5000</td><td>3.2500</td><td>&ndash;</td>"
                      "<td>12345</td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("256 bytes"), std::string::npos);
  const fs::path runs = synthetic_runs();
  EXPECT_EQ(render_report(load_runs({(runs / "fp32").string()}), {}).find("token run"),
            std::string::npos);
}

// A run with codec/sync = "auto" shows its choice, runner-up, predicted and measured rates and
// start-up cost; runs without it add no such table.
TEST(Report, AutoRunsShowTheirChoice) {
  const fs::path d = fresh_dir("auto");
  write(d / "auto/config.toml", "codec = \"onebit\"\n");
  write(d / "auto/metrics.jsonl", epoch_line(1, 0.6, 0.80, 1) + "\n");
  write(d / "auto/summary.json",
        R"({"test_acc":0.85,"samples_per_s":5000,"workers":2,"auto":{)"
        R"("chosen":{"codec":"onebit","sync":"bmuf","tau":8,"bucket_kib":1024,)"
        R"("predicted_samples_per_s":5200},"runner_up":{"codec":"onebit","sync":"allreduce",)"
        R"("bucket_kib":4096,"predicted_samples_per_s":4900},)"
        R"("measured":{"cost_share_of_1000_steps":0.012}}})");
  const std::string html = render_report(load_runs({(d / "auto").string()}), {});
  EXPECT_NE(html.find("<td>onebit, bmuf tau 8, 1024 KiB</td><td>onebit, allreduce, 4096 KiB</td>"
                      "<td>5200</td><td>5000</td><td>1.2%</td>"),
            std::string::npos)
      << html;
  // No check, and so no fidelity either.
  EXPECT_NE(html.find("<td>1.2%</td><td>-</td><td>-</td></tr>"), std::string::npos) << html;
  // A run whose check switched: the window's step against the prediction, and to what.
  write(d / "switched/config.toml", "codec = \"onebit\"\n");
  write(d / "switched/metrics.jsonl", epoch_line(1, 0.6, 0.80, 1) + "\n");
  write(d / "switched/summary.json",
        R"({"samples_per_s":5000,"workers":2,"auto":{"chosen":{"codec":"fp32",)"
        R"("sync":"allreduce","bucket_kib":4096,"predicted_samples_per_s":9000},)"
        R"("revision":{"outcome":"switched","window":{"first_step":10,"steps":20},)"
        R"("measured":{"step_s":0.03},"predicted":{"step_s":0.02},)"
        R"("after":{"codec":"onebit","sync":"bmuf","tau":8,"bucket_kib":4096},)"
        R"("candidates":[{"codec":"onebit","sync":"allreduce","bucket_kib":4096,)"
        R"("fidelity":{"drift":0.05},"fidelity_verdict":{"risk":"within"}},)"
        R"({"codec":"topk","sync":"allreduce","bucket_kib":4096,)"
        R"("fidelity":{"drift":0.9},"fidelity_verdict":{"risk":"over"}}]}}})");
  const std::string sw = render_report(load_runs({(d / "switched").string()}), {});
  EXPECT_NE(sw.find("<td>step +50%: switched at step 30 to onebit, bmuf tau 8, 4096 KiB</td>"),
            std::string::npos)
      << sw;
  EXPECT_NE(sw.find("<td>onebit: within (drift 0.050); topk: over (drift 0.900)</td>"),
            std::string::npos)
      << sw;
  const fs::path runs = synthetic_runs();
  EXPECT_EQ(render_report(load_runs({(runs / "fp32").string()}), {}).find("auto run"),
            std::string::npos);
  fs::remove_all(d);
}

}  // namespace
}  // namespace loom::experiments
