// The run directory's versioned files: every metrics line and the summary carry
// "format_version", and a resume refuses a metrics file of a newer version.
#include "loom/train/run_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "data/temp_dir.h"
#include "loom/core/error.h"

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

}  // namespace
}  // namespace loom::train
