// Event files as TensorBoard finds them: named by its convention, opening with the
// file_version event, one new file per writer beside the earlier ones, each record framed and
// checked.
#include "loom/train/tensorboard_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

#include "data/temp_dir.h"
#include "loom/core/error.h"
#include "train/event_file_reader.h"

namespace loom::train {
namespace {

namespace fs = std::filesystem;
using loom::data::testing::TempDir;
using testing::read_events;

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(TensorBoardWriter, NamesTheFileAsTensorBoardDoesAndOpensWithTheFileVersion) {
  TempDir t;
  const fs::path dir = fs::path(t.path()) / "tb";
  TensorBoardWriter w(dir.string());  // creates the folder
  const std::vector<std::string> files = files_in(dir);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0], w.path());
  EXPECT_TRUE(std::regex_match(fs::path(w.path()).filename().string(),
                               std::regex(R"(events\.out\.tfevents\.\d{10}\..+\.\d+)")))
      << w.path();
  const auto events = read_events(files);
  ASSERT_EQ(events.size(), 1u);  // written at once, before anything else
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_GT(events[0].wall_time, 1.6e9);  // seconds since 1970, not since start-up
}

TEST(TensorBoardWriter, ScalarsTextHistogramsAndRestartsReadBack) {
  TempDir t;
  TensorBoardWriter w(t.path());
  w.scalar("epoch/train_loss", 26, 0.123456789);
  w.text("config", 0, "    a = 1\n");
  w.histogram("weights/linear_0.weight", 20, std::vector<float>{-1, 0, 2});
  w.restart_at(41);
  w.flush();
  const auto e = read_events({w.path()});
  ASSERT_EQ(e.size(), 5u);
  EXPECT_EQ(e[1].tag, "epoch/train_loss");
  EXPECT_EQ(e[1].step, 26);
  EXPECT_TRUE(e[1].has_scalar);
  EXPECT_EQ(e[1].scalar, float(0.123456789));
  EXPECT_EQ(e[2].tag, "config");
  EXPECT_EQ(e[2].text, "    a = 1\n");
  EXPECT_TRUE(e[3].has_histogram);
  EXPECT_EQ(e[3].step, 20);
  EXPECT_EQ(e[3].h_num, 3);
  EXPECT_EQ(e[3].h_min, -1);
  EXPECT_EQ(e[3].h_max, 2);
  EXPECT_TRUE(e[4].session_start);
  EXPECT_EQ(e[4].step, 41);
}

// A resumed run writes a new file; the earlier one stays byte for byte, and sorts first.
TEST(TensorBoardWriter, ASecondWriterAddsAFileAndLeavesTheFirst) {
  TempDir t;
  std::string first_path, first_bytes;
  {
    TensorBoardWriter a(t.path());
    a.scalar("step/train_loss", 10, 2.0);
    a.flush();
    first_path = a.path();
    first_bytes = bytes_of(first_path);
  }
  TensorBoardWriter b(t.path());
  b.scalar("step/train_loss", 20, 1.0);
  b.flush();
  const std::vector<std::string> files = files_in(t.path());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(bytes_of(first_path), first_bytes);
  EXPECT_EQ(files[0], first_path);  // a later second, or the same name with ".1" added
  EXPECT_EQ(files[1], b.path());
}

TEST(TensorBoardWriter, AFolderThatCannotBeMadeIsAnInputErrorNamingIt) {
  TempDir t;
  std::ofstream(fs::path(t.path()) / "file") << "x";
  const std::string dir = (fs::path(t.path()) / "file" / "tb").string();
  try {
    TensorBoardWriter w(dir);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr(dir));
  }
}

}  // namespace
}  // namespace loom::train
