#include "loom/core/io/atomic_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "data/temp_dir.h"
#include "loom/core/error.h"

namespace loom::core {
namespace {

namespace fs = std::filesystem;
using data::testing::TempDir;
using ::testing::HasSubstr;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int files_in(const std::string& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(AtomicFile, WritesTheWholeFileAndReplacesAnOldOne) {
  TempDir t;
  const std::string path = t.file("a.json");
  write_file_atomically(path, std::string_view("first\n"));
  EXPECT_EQ(read(path), "first\n");
  write_file_atomically(path, std::string_view("second, longer\n"));
  EXPECT_EQ(read(path), "second, longer\n");
  EXPECT_EQ(files_in(t.path()), 1);  // no temporary left beside it
}

// A full disk (/dev/full behind the temporary's name) fails the write: the error names the file
// asked for, the old contents stay, and the temporary goes.
TEST(AtomicFile, AFailedWriteKeepsTheOldFileAndLeavesNoTemporary) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  TempDir t;
  const std::string path = t.file("a.json");
  write_file_atomically(path, std::string_view("old\n"));
  fs::create_symlink("/dev/full", path + ".tmp." + std::to_string(::getpid()));
  try {
    write_file_atomically(path, std::string(1 << 16, 'x'));
    FAIL() << "no error on a full disk";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path + ": cannot write"));
  }
  EXPECT_EQ(read(path), "old\n");
  EXPECT_EQ(files_in(t.path()), 1);
}

TEST(AtomicFile, DroppedWithoutCommitLeavesNothing) {
  TempDir t;
  const std::string path = t.file("s.shard");
  {
    AtomicFile f(path);
    std::fputs("half a file", f.file());
  }
  EXPECT_EQ(files_in(t.path()), 0);
  {
    AtomicFile f(path);
    std::fputs("whole", f.file());
    f.commit();
  }
  EXPECT_EQ(read(path), "whole");
}

TEST(AtomicFile, AMissingFolderIsAnErrorNamingTheFile) {
  TempDir t;
  const std::string path = t.file("no/such/folder/a.csv");
  try {
    write_file_atomically(path, std::string_view("x"));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path + ": cannot write"));
  }
}

}  // namespace
}  // namespace loom::core
