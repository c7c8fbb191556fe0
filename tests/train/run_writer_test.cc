// The run directory's versioned files: every metrics line and the summary carry
// "format_version", and a resume refuses a metrics file of a newer version. The TensorBoard
// event files in tb/ hold every number of the metrics lines, before and after a resume.
#include "loom/train/run_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <utility>
#include <vector>

#include "data/temp_dir.h"
#include "loom/core/error.h"
#include "train/event_file_reader.h"

namespace loom::train {
namespace {

namespace fs = std::filesystem;
using loom::data::testing::TempDir;

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(RunWriter, MetricsLinesAndSummaryCarryTheFormatVersion) {
  TempDir dir;
  {
    RunWriter w(dir.path());
    w.open();
    w.append_metrics({{"epoch", 1}, {"train_loss", 0.5}});
    w.append_metrics({{"epoch", 2}, {"train_loss", 0.4}});
    w.write_summary({{"test_acc", 0.8}, {"params_fnv1a64", "0123456789abcdef"}});
  }
  const auto lines = read_lines(dir.file("metrics.jsonl"));
  ASSERT_EQ(lines.size(), 2u);
  for (size_t i = 0; i < lines.size(); ++i) {
    const nlohmann::json j = nlohmann::json::parse(lines[i]);
    EXPECT_EQ(j.at("format_version"), kMetricsFormatVersion) << lines[i];
    EXPECT_EQ(j.at("epoch"), int(i + 1));
  }
  std::ifstream in(dir.file("summary.json"));
  const nlohmann::json summary = nlohmann::json::parse(in);
  EXPECT_EQ(summary.at("format_version"), kSummaryFormatVersion);
  EXPECT_EQ(summary.at("params_fnv1a64"), "0123456789abcdef");
  // Metrics version 2: per-epoch validation figures instead of a per-epoch test_acc.
  EXPECT_EQ(kMetricsFormatVersion, 2);
  EXPECT_EQ(kSummaryFormatVersion, 1);
}

TEST(RunWriter, ResumeKeepsUnversionedLinesAndRefusesANewerVersion) {
  TempDir dir;
  // Lines of an older loom (no format_version), one of this build's, and a cut-short line.
  std::ofstream(dir.file("metrics.jsonl"))
      << "{\"epoch\":1,\"train_loss\":0.5}\n{\"epoch\":2,\"format_version\":1}\n{\"epoch\":3,";
  {
    RunWriter w(dir.path(), true);
    w.open();
    w.keep_epochs_through(2, 1000);
  }
  EXPECT_EQ(read_lines(dir.file("metrics.jsonl")),
            (std::vector<std::string>{"{\"epoch\":1,\"train_loss\":0.5}",
                                      "{\"epoch\":2,\"format_version\":1}"}));

  std::ofstream(dir.file("metrics.jsonl"), std::ios::app) << "{\"epoch\":3,\"format_version\":5}\n";
  RunWriter w(dir.path(), true);
  w.open();
  try {
    w.keep_epochs_through(3, 1000);
    FAIL() << "a metrics line of version 5 was read";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find((fs::path(dir.path()) / "metrics.jsonl").string() + ":3"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("metrics format version 5"), std::string::npos) << msg;
  }
}

TEST(RunWriter, ParseMetricsLineSkipsWhatIsNotAnEpochRecord) {
  EXPECT_FALSE(parse_metrics_line("{\"epoch\":3,", "f:1"));
  EXPECT_FALSE(parse_metrics_line("[1,2]", "f:1"));
  EXPECT_FALSE(parse_metrics_line("{\"steps\":3}", "f:1"));
  EXPECT_TRUE(parse_metrics_line("{\"epoch\":3}", "f:1"));
  // Version 1 (a per-epoch test_acc) and 2 (val_loss, val_acc) are read; 3 is refused.
  EXPECT_TRUE(parse_metrics_line("{\"epoch\":3,\"format_version\":1,\"test_acc\":0.8}", "f:1"));
  EXPECT_TRUE(parse_metrics_line("{\"epoch\":3,\"format_version\":2,\"val_acc\":0.8}", "f:1"));
  EXPECT_THROW(parse_metrics_line("{\"epoch\":3,\"format_version\":3}", "f:1"), InputError);
}

// The event files of a run directory, in name order (TensorBoard's reading order).
std::vector<std::string> event_files(const std::string& run) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(fs::path(run) / kTensorBoardDir))
    out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// (tag, step) -> value of the scalars as TensorBoard keeps them: a SessionLog START drops
// every event read so far at its step or later (EventAccumulator's purge of orphaned data).
std::map<std::pair<std::string, int64_t>, float> scalars_as_tensorboard_keeps(
    const std::vector<testing::DecodedEvent>& events) {
  std::map<std::pair<std::string, int64_t>, float> kept;
  for (const auto& e : events) {
    if (e.session_start)
      std::erase_if(kept, [&](const auto& kv) { return kv.first.second >= e.step; });
    if (e.has_scalar) kept[{e.tag, e.step}] = e.scalar;
  }
  return kept;
}

// The same from metrics.jsonl: every number of every line with a "step".
std::map<std::pair<std::string, int64_t>, float> scalars_of_metrics(const std::string& path) {
  std::map<std::pair<std::string, int64_t>, float> out;
  for (const std::string& line : read_lines(path)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (!j.contains("step")) continue;
    for (const auto& [k, v] : j.items())
      if (k != "step" && k != "format_version" && v.is_number())
        out[{j.value("kind", "epoch") + "/" + k, j.at("step").get<int64_t>()}] =
            float(v.get<double>());
  }
  return out;
}

TEST(RunWriter, EveryNumberOfALineWithAStepIsAScalarAtThatStep) {
  TempDir dir;
  RunWriter w(dir.path());
  w.open();
  w.write_config("a = 1\n[b]\nc = \"d\"\n");
  w.append_metrics({{"kind", "step"},
                    {"epoch", 1},
                    {"step", 10},
                    {"train_loss", 2.25},
                    {"lr", 0.05},
                    {"token_unit", "byte"}});
  w.append_metrics({{"kind", "epoch"},
                    {"epoch", 1},
                    {"step", 26},
                    {"train_loss", 1.5},
                    {"val_acc", nullptr},
                    {"bytes_sent", int64_t(1) << 40}});
  w.append_metrics({{"epoch", 2}, {"train_loss", 1.0}});  // no step: metrics.jsonl only
  const auto events = testing::read_events(event_files(dir.path()));
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_EQ(events[1].tag, "config");
  EXPECT_EQ(events[1].text, "    a = 1\n    [b]\n    c = \"d\"\n");  // Markdown code
  const auto scalars = scalars_as_tensorboard_keeps(events);
  const std::map<std::pair<std::string, int64_t>, float> want = {
      {{"step/epoch", 10}, 1.0f},       {{"step/train_loss", 10}, 2.25f},
      {{"step/lr", 10}, 0.05f},         {{"epoch/epoch", 26}, 1.0f},
      {{"epoch/train_loss", 26}, 1.5f}, {{"epoch/bytes_sent", 26}, float(int64_t(1) << 40)}};
  EXPECT_EQ(scalars, want);
  EXPECT_EQ(scalars, scalars_of_metrics(dir.file("metrics.jsonl")));
}

// A run stopped at step 30, in its second epoch, resumed from its checkpoint there: the epoch
// cut short leaves metrics.jsonl, and TensorBoard's view of the two event files drops it too,
// while the step line of step 30 stays in both.
TEST(RunWriter, AResumedRunsEventFilesShowWhatItsMetricsLinesShow) {
  TempDir dir;
  {
    RunWriter w(dir.path());
    w.open();
    w.write_config("a = 1\n");
    for (int64_t s : {10, 20, 30})
      w.append_metrics(
          {{"kind", "step"}, {"epoch", s / 26 + 1}, {"step", s}, {"train_loss", 3.0 / double(s)}});
    w.append_metrics({{"kind", "epoch"}, {"epoch", 1}, {"step", 26}, {"train_loss", 0.2}});
    w.append_metrics({{"kind", "epoch"}, {"epoch", 2}, {"step", 30}, {"train_loss", 0.9}});
  }
  RunWriter w(dir.path(), true);
  w.open();
  w.write_config("a = 1\n");
  w.keep_epochs_through(1, 30);
  w.append_metrics({{"kind", "step"}, {"epoch", 2}, {"step", 40}, {"train_loss", 0.05}});
  w.append_metrics({{"kind", "epoch"}, {"epoch", 2}, {"step", 52}, {"train_loss", 0.1}});
  const std::vector<std::string> files = event_files(dir.path());
  ASSERT_EQ(files.size(), 2u);
  const auto scalars = scalars_as_tensorboard_keeps(testing::read_events(files));
  EXPECT_EQ(scalars, scalars_of_metrics(dir.file("metrics.jsonl")));
  EXPECT_EQ(scalars.count({"epoch/train_loss", 30}), 0u);
  EXPECT_EQ(scalars.count({"step/train_loss", 30}), 1u);
}

}  // namespace
}  // namespace loom::train
